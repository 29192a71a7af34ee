"""The example of docs/plugins.md: a per-user reward from the words of what each user chose before."""

from prbj import HistoryItem, ScoreItem


class Overlap:
    name = "word-overlap"
    version = "1"

    def __init__(self) -> None:
        self.liked: dict[str, set[str]] = {}

    def fit_user(self, user_id: str, history: list[HistoryItem]) -> None:
        chosen = {w for h in history for w in h.chosen.lower().split()}
        rejected = {w for h in history for w in h.rejected.lower().split()}
        self.liked[user_id] = chosen - rejected  # words only their favourites used

    def score(self, items: list[ScoreItem]) -> list[float]:
        scores = []
        for item in items:
            words = set(item.response.lower().split())
            liked = self.liked.get(item.user_id, set())
            scores.append(len(words & liked) / (len(words) or 1))
        return scores
