"""The length baseline as a Python reward model: the answer with more words wins (docs/plugins.md)."""

from prbj import ScoreItem


class Length:
    name = "length"
    version = "1"

    def score(self, items: list[ScoreItem]) -> list[float]:
        return [float(len(item.response.split())) for item in items]
