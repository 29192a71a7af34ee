"""Reading a benchmark through its card: the card's loader turns the source's files into the per-user layout
(prbj.data.per_user), which makes the pairs (or best-of-k items) and the users' histories.

- `per-user`: records already in the layout, or mapped onto it by the card's [columns], [groups] and [facts]
  (prbj.data.card_columns; a column path reads inside nested objects and lists).
- `prism`: PRISM's survey, utterances and conversations files (prbj.data.prism_loader).
- `persona-feedback`: PersonaFeedback's published files, by name (prbj.data.persona_feedback_loader).
- `persona`: PERSONA's persona feedback, half of each persona's rows judged (prbj.data.persona_loader).
- `personamem`: PersonaMem's questions and shared contexts, best-of-4 (prbj.data.personamem_loader).
- `personal-llm`: PersonalLLM's prompts with 8 responses scored by 10 reward models, and its users as weightings
  of them (prbj.data.personal_llm_loader).
- `pal-tldr`: PAL's Reddit TL;DR users, seen and unseen (prbj.data.pal_tldr_loader).

A loader that reads named files only (`wanted`) is handed those: the others are not read at all, and a note says
how many were left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.abc import Traversable
from pathlib import Path, PurePosixPath

from prbj.data.card_columns import layout, renamer
from prbj.data.card_sample import SAMPLE_SUFFIXES, sample_files
from prbj.data.cards import Card
from prbj.data.dataset import Blob, Dataset, blob_records, blobs_hash, file_blobs
from prbj.data.loader_output import Mapped
from prbj.data.per_user import ReadOptions, UserData, validate_user_records
from prbj.data.user_items import ItemRule


@dataclass(frozen=True)
class Loader:
    read: Callable[[Card, Sequence[Blob]], Mapped]
    # The files it reads, by their path (None: every data file).
    wanted: Callable[[str], bool] | None = None


def _per_user(card: Card, blobs: Sequence[Blob]) -> Mapped:
    records = [(location, layout(record, card)) for blob in blobs for location, record in blob_records(blob)]
    options = ReadOptions(
        rename=renamer(card), split_map=card.split_map, rule=ItemRule(card.items, card.tie_margin)
    )
    return Mapped(records, options)


def loader_of(card: Card) -> Loader:
    """The loader a card names (imported when asked for: each reads one source's files)."""
    if card.loader == "prism":
        from prbj.data.prism_loader import read_prism

        return Loader(read_prism)
    if card.loader == "persona-feedback":
        from prbj.data.persona_feedback_loader import read_persona_feedback
        from prbj.data.persona_feedback_loader import wanted as published

        return Loader(read_persona_feedback, published)
    if card.loader == "persona":
        from prbj.data.persona_loader import read_persona

        return Loader(read_persona)
    if card.loader == "personamem":
        from prbj.data.personamem_loader import read_personamem
        from prbj.data.personamem_loader import wanted as named_files

        return Loader(read_personamem, named_files)
    if card.loader == "personal-llm":
        from prbj.data.personal_llm_loader import read_personal_llm

        return Loader(read_personal_llm)
    if card.loader == "pal-tldr":
        from prbj.data.pal_tldr_loader import read_pal_tldr

        return Loader(read_pal_tldr)
    return Loader(_per_user)


def chosen_files(card: Card, names: Sequence[str]) -> tuple[list[int], list[str]]:
    """Which of the files (by name) the card's loader reads, and the names of those it leaves."""
    wanted = loader_of(card).wanted
    if wanted is None:
        return list(range(len(names))), []
    kept = [i for i, name in enumerate(names) if wanted(name)]
    return kept, [name for i, name in enumerate(names) if i not in set(kept)]


def ignored_note(card: Card, ignored: Sequence[str]) -> str | None:
    if not ignored:
        return None
    shown = ", ".join(PurePosixPath(name).name for name in ignored[:3])
    more = f" and {len(ignored) - 3} more" if len(ignored) > 3 else ""
    return (
        f"{len(ignored)} file{'s' if len(ignored) != 1 else ''} that the {card.loader} loader does not read "
        f"ignored ({shown}{more})"
    )


def card_file_blobs(card: Card, files: Sequence[Path]) -> tuple[list[Blob], list[str]]:
    """The files a card's loader reads (read from disk), and the names of those it leaves unread."""
    kept, ignored = chosen_files(card, [str(f) for f in files])
    return file_blobs([files[i] for i in kept]), ignored


def sample_blobs(card: Card) -> tuple[list[Blob], list[str]]:
    """The data files of a card's sample, named `<card>/sample/<relative path>`: a shipped sample from the
    package, a user's from beside their card (never through a link out of its folder)."""
    assert card.sample is not None
    prefix = f"{card.name}/sample"
    if isinstance(card.sample, Path) and card.path is not None:
        found = [(relative, path.read_bytes) for relative, path in sample_files(card.sample, card.path)]
    else:
        found = [(relative, node.read_bytes) for relative, node in _shipped(card.sample)]
    names = [f"{prefix}/{relative}" for relative, _ in found]
    kept, ignored = chosen_files(card, names)
    return [Blob(names[i], found[i][1]()) for i in kept], ignored


def _shipped(folder: Traversable) -> list[tuple[str, Traversable]]:
    found: list[tuple[str, Traversable]] = []

    def walk(node: Traversable, relative: str) -> None:
        for child in node.iterdir():
            path = f"{relative}/{child.name}" if relative else child.name
            if child.is_dir():
                walk(child, path)
            elif PurePosixPath(child.name).suffix in SAMPLE_SUFFIXES:
                found.append((path, child))

    walk(folder, "")
    return sorted(found, key=lambda f: f[0])


def read_with_card(card: Card, source: str, blobs: Sequence[Blob], ignored: Sequence[str] = ()) -> Dataset:
    """The pairs of `blobs` read by `card`'s loader (`ignored`: the files it left unread, for a note)."""
    mapped = loader_of(card).read(card, blobs)
    data: UserData = validate_user_records(mapped.records, mapped.options)
    note = ignored_note(card, ignored)
    return Dataset(
        source,
        tuple(data.pairs),
        blobs_hash(blobs, card.digest),
        benchmark=card.name,
        benchmark_version=card.version,
        card=str(card.path.resolve()) if card.path is not None else None,
        history_rows=data.history_rows,
        notes=(*mapped.notes, *data.notes, *([note] if note else [])),
    )
