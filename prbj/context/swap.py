"""The profile-swap control: which other user's profile a pair is shown in the `swapped-profile` context.

Each pair gets a donor drawn from the other pairs of its subset whose profile differs from its own (the same
user may ask several questions; showing them their own profile would be no swap). A subset with no other user
falls back to the pairs of all subsets; a dataset with a single user cannot be swapped.

Every candidate gets a rank hashed from (seed, pair id, candidate id) and the lowest rank wins: a pair keeps its
donor under any --subset or --limit that still selects that donor, and cached swapped judgments stay valid.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from prbj.data.schema import Pair, ProfilePost
from prbj.errors import ConfigError


def swap_donors(pairs: Sequence[Pair], seed: int) -> dict[str, str]:
    """Pair id → the id of the pair whose profile it is shown instead of its own."""
    donors: dict[str, str] = {}
    ordered = sorted(pairs, key=lambda p: p.id)
    for pair in ordered:
        candidates = [p for p in ordered if p.category == pair.category and _other_user(pair, p)]
        if not candidates:
            candidates = [p for p in ordered if _other_user(pair, p)]
        if not candidates:
            raise ConfigError(
                f"--context swapped-profile: pair {pair.id} has no other user's profile to be shown "
                "(the selection holds a single user)"
            )
        donors[pair.id] = min(candidates, key=lambda c: _rank(seed, pair.id, c.id)).id
    return donors


def swapped_profiles(pairs: Sequence[Pair], seed: int) -> dict[str, tuple[ProfilePost, ...]]:
    """Pair id → the profile to show it in the `swapped-profile` context."""
    by_id = {p.id: p for p in pairs}
    return {pair_id: by_id[donor].profile for pair_id, donor in swap_donors(pairs, seed).items()}


def _rank(seed: int, pair_id: str, candidate_id: str) -> str:
    return hashlib.sha256(f"{seed}:swap:{pair_id}:{candidate_id}".encode()).hexdigest()


def _other_user(pair: Pair, candidate: Pair) -> bool:
    return candidate.id != pair.id and candidate.profile != pair.profile
