"""A user's card names its sample (`[data] sample`): a file or folder that lies beside the card.

A card is a file from elsewhere, so its sample path is untrusted: it must be relative to the card's folder and
stay inside it, `..` and absolute paths are refused, and nothing is read through a symbolic link that leads out
of the folder or round in a loop (a card naming `/etc` read every JSON file there). Each problem is one line
naming the card, the line and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from prbj.data.toml_lines import TomlFields
from prbj.errors import ConfigError

SAMPLE_SUFFIXES = frozenset({".jsonl", ".json", ".parquet", ".csv"})
_FIELD = "data.sample"


def _inside(path: Path, home: Path) -> bool:
    return path == home or path.is_relative_to(home)


def _resolved(path: Path) -> Path:
    """`path` with every link followed; a loop raises OSError (Python 3.13) or RuntimeError (3.11)."""
    try:
        return path.resolve(strict=True)
    except RuntimeError as err:  # Python 3.11 names a symlink loop this way
        raise OSError(str(err)) from None


def user_sample(fields: TomlFields, data: Mapping[str, Any], card: Path) -> Path | None:
    """The sample a user's card names, checked to lie beside the card; None when it names none."""
    value = fields.string(data, "sample", "data")
    if value is None:
        return None
    written = PurePosixPath(value.replace("\\", "/"))
    if written.is_absolute() or PureWindowsPath(value).is_absolute() or ".." in written.parts:
        raise fields.error(
            _FIELD,
            f"{value}: a sample lies beside its card: give a path inside the card's folder, without '..'",
        )
    home = card.parent.resolve()
    try:
        target = _resolved(home / written)
    except FileNotFoundError:
        raise fields.error(_FIELD, f"{value}: no such file or folder (relative to the card)") from None
    except OSError as err:
        raise fields.error(_FIELD, f"{value}: cannot be read ({_why(err)})") from None
    if not _inside(target, home):
        raise fields.error(_FIELD, f"{value}: leads outside the card's folder (through a symbolic link)")
    return target


def _why(err: OSError) -> str:
    text = err.strerror or str(err)
    return "a symbolic link loop" if "loop" in text.lower() or "symbolic links" in text.lower() else text


def sample_files(root: Path, card: Path) -> list[tuple[str, Path]]:
    """The data files of a user's sample (a file, or a folder walked at any depth), each with its path relative to
    the sample, in path order. A link is followed only to a place inside the card's folder; a link out of it, a
    broken link or a loop is one line naming the card and the field."""
    home = card.parent.resolve()

    def refuse(where: PurePath, problem: str) -> ConfigError:
        return ConfigError(f"{card}: field '{_FIELD}': {where}: {problem}")

    def resolved(path: Path, shown: PurePath) -> Path:
        try:
            target = _resolved(path)
        except FileNotFoundError:
            raise refuse(shown, "a broken symbolic link") from None
        except OSError as err:
            raise refuse(shown, f"cannot be read ({_why(err)})") from None
        if not _inside(target, home):
            raise refuse(shown, "leads outside the card's folder (through a symbolic link)")
        return target

    start = resolved(root, PurePath(root.name))
    if start.is_file():
        return [(root.name, start)]
    found: list[tuple[str, Path]] = []
    walking: set[Path] = set()

    def walk(folder: Path, relative: PurePosixPath) -> None:
        if folder in walking:
            raise refuse(relative, "a symbolic link loop (a folder inside itself)")
        walking.add(folder)
        for child in sorted(folder.iterdir(), key=lambda p: p.name):
            shown = relative / child.name
            target = resolved(child, shown) if child.is_symlink() else child
            if target.is_dir():
                walk(target, shown)
            elif target.is_file() and target.suffix in SAMPLE_SUFFIXES:
                found.append((str(shown), target))
        walking.discard(folder)

    walk(start, PurePosixPath())
    return sorted(found)
