"""How token rows are cut, grouped and packed into forward passes. Pure functions of token ids and lengths, so
that the rules that decide speed can be tested without a model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Largest group of rows sharing one prefix that the grouping considers (bounds its quadratic search).
MAX_GROUP = 64


def truncate_middle(ids: Sequence[int], max_length: int) -> tuple[list[int], bool]:
    """`ids` cut to `max_length` tokens by dropping the middle; whether anything was dropped. The head holds the
    template's start (BOS, system, role markers, the question), the tail the end of the assistant turn, where a
    reward model reads its score."""
    if len(ids) <= max_length:
        return list(ids), False
    head = max_length // 2
    tail = max_length - head
    return [*ids[:head], *ids[len(ids) - tail :]], True


def pack_by_tokens(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Indices of `lengths` grouped into batches, longest first, so that each batch's padded size (rows ×
    longest row) stays within `budget`. Sorting keeps padding small; an item longer than the budget goes alone."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        # Sorted longest first, so the first item of a batch is its widest row.
        width = lengths[current[0]] if current else lengths[index]
        if current and (len(current) + 1) * width > budget:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


@dataclass(frozen=True, slots=True)
class PrefixGroup:
    """Rows (by index) whose first `prefix_length` tokens are identical; each has at least one token after it."""

    prefix_length: int
    members: tuple[int, ...]


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _last_scored(row: Sequence[int], pad_id: int | None) -> int:
    """Index of the token a pooling head reads: the last one that is not the pad id."""
    for i in range(len(row) - 1, -1, -1):
        if row[i] != pad_id:
            return i
    return len(row) - 1


def group_by_prefix(rows: Sequence[Sequence[int]], pad_id: int | None = None) -> list[PrefixGroup]:
    """Rows grouped by a shared leading run of tokens (the two answers of a pair share the whole user turn),
    so as to skip as many repeated tokens as possible.

    Rows are sorted, so rows sharing a prefix are neighbours; a dynamic programme then cuts the sorted run into
    groups maximising the tokens not recomputed (prefix length × (members - 1)). This keeps a pair together
    rather than merging it with every row that merely shares the template's header. A group's prefix stops
    before the token the pooling reads (the last one that is not `pad_id`), so every row scores that token in
    its own part; a row without a partner is split just before it."""
    n = len(rows)
    order = sorted(range(n), key=lambda i: (list(rows[i]), i))
    cap = [_last_scored(rows[i], pad_id) for i in order]
    link = [_common_prefix(rows[order[k]], rows[order[k + 1]]) for k in range(n - 1)]
    saved = [0] * (n + 1)  # saved[j]: best saving over the first j sorted rows
    start = [0] * (n + 1)  # where the last group of that best split starts
    for j in range(1, n + 1):
        saved[j], start[j] = saved[j - 1], j - 1
        shared = cap[j - 1]
        for i in range(j - 2, max(-1, j - 1 - MAX_GROUP), -1):
            shared = min(shared, link[i], cap[i])
            if shared == 0:
                break
            if saved[i] + shared * (j - 1 - i) > saved[j]:
                saved[j], start[j] = saved[i] + shared * (j - 1 - i), i
    groups: list[PrefixGroup] = []
    j = n
    while j > 0:
        i = start[j]
        length = min([*cap[i:j], *link[i : j - 1]])
        groups.append(PrefixGroup(length, tuple(order[i:j])))
        j = i
    return groups[::-1]


def pack_groups(
    groups: Sequence[PrefixGroup], lengths: Sequence[int], budget: int
) -> list[list[PrefixGroup]]:
    """Groups packed into forward passes, longest prefix first, so that rows × (longest prefix + longest
    suffix) stays within `budget`; a group over the budget goes alone."""
    order = sorted(groups, key=lambda g: (-g.prefix_length, g.members))
    batches: list[list[PrefixGroup]] = []
    current: list[PrefixGroup] = []
    rows = prefix = suffix = 0
    for group in order:
        group_suffix = max(lengths[i] for i in group.members) - group.prefix_length
        new_rows = rows + len(group.members)
        new_prefix = max(prefix, group.prefix_length)
        new_suffix = max(suffix, group_suffix)
        if current and new_rows * (new_prefix + new_suffix) > budget:
            batches.append(current)
            current, new_rows, new_prefix, new_suffix = (
                [],
                len(group.members),
                group.prefix_length,
                group_suffix,
            )
        current.append(group)
        rows, prefix, suffix = new_rows, new_prefix, new_suffix
    if current:
        batches.append(current)
    return batches
