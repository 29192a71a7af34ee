"""The profile-swap control: which other user's profile a pair is shown in the `swapped-profile` context.

Each pair gets a donor drawn from the other users of its subset whose profile differs from its own (a swap is
between users, never between two pairs of the same user: showing them their own profile would be no swap). A
subset with no other user falls back to the users of all subsets; a dataset with a single user cannot be swapped.

Every candidate user gets a rank hashed from (seed, pair id, candidate user id) and the lowest rank wins (on
Personalized RewardBench every pair is its own user, so the candidate user is the candidate pair): a pair keeps
its donor under any --subset or --limit that still selects that donor, and cached swapped judgments stay valid.
The donor's whole profile is shown: posts, earlier preferences, persona and stated facts alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from prbj.data.schema import Pair, UserProfile
from prbj.errors import ConfigError
from prbj.privacy.placeholders import apart


def swap_donors(pairs: Sequence[Pair], seed: int) -> dict[str, str]:
    """Pair id → the id of the pair whose profile (its user's) it is shown instead of its own: the first pair,
    by id, of the donor user in the subset it was drawn from."""
    ordered = sorted(pairs, key=lambda p: p.id)
    profiles = {p.user_id: p.user_profile for p in ordered}
    # Each user's first pair by id, in each subset and overall.
    first_in: dict[tuple[str, str], str] = {}
    first: dict[str, str] = {}
    for p in ordered:
        first_in.setdefault((p.category, p.user_id), p.id)
        first.setdefault(p.user_id, p.id)
    donors: dict[str, str] = {}
    for pair in ordered:
        own = profiles[pair.user_id]

        def other(user: str, own_user: str = pair.user_id, own_profile: object = own) -> bool:
            return user != own_user and profiles[user] != own_profile

        candidates = {
            u: pid for (category, u), pid in first_in.items() if category == pair.category and other(u)
        }
        if not candidates:
            candidates = {u: pid for u, pid in first.items() if other(u)}
        if not candidates:
            raise ConfigError(
                f"--context swapped-profile: pair {pair.id} has no other user's profile to be shown "
                "(the selection holds a single user)"
            )
        donor = min(candidates, key=lambda user: (_rank(seed, pair.id, user), candidates[user]))
        donors[pair.id] = candidates[donor]
    return donors


def swapped_profiles(pairs: Sequence[Pair], seed: int) -> dict[str, UserProfile]:
    """Pair id → the profile (another user's) to show it in the `swapped-profile` context, its pseudonyms
    numbered apart from those of the pair's own question and answers (prbj.privacy.placeholders)."""
    by_id = {p.id: p for p in pairs}
    return {
        pair_id: apart(by_id[donor].user_profile, _shown_with(by_id[pair_id]))
        for pair_id, donor in swap_donors(pairs, seed).items()
    }


def _shown_with(pair: Pair) -> list[str]:
    """The pair's own texts a judge reads beside the donor's profile."""
    return [pair.question, pair.chosen, pair.rejected, *(content for _, content in pair.turns)]


def _rank(seed: int, pair_id: str, candidate_user: str) -> str:
    return hashlib.sha256(f"{seed}:swap:{pair_id}:{candidate_user}".encode()).hexdigest()
