"""Find a local model (a folder, a .gguf file, or a hub id in the Hugging Face cache) and fingerprint it: the one
locator and the one fingerprint of both scalar reward models (`hf:`) and the generator (`hf-local:`).

The fingerprint goes into cache keys: a score or a reply computed with other weights, another tokenizer or
another chat template must never be served from the cache. It needs no torch, so a rerun can be checked against
the cache before any model is loaded.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from prbj.errors import ConfigError
from prbj.llm.cache import ResponseCache, cache_key

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SNAPSHOT_DIR = re.compile(r"^[0-9a-f]{40}$")
# Files that cannot change a score: documentation and VCS or tool metadata.
_IGNORED_SUFFIXES = (".md",)
_CHUNK = 1 << 24


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from: a folder (absolute) or a hub id for from_pretrained, and a GGUF file in the
    folder, if any."""

    location: str
    gguf_file: str | None = None

    @property
    def label(self) -> str:
        return f"{self.location}/{self.gguf_file}" if self.gguf_file else self.location

    @property
    def is_local(self) -> bool:
        return Path(self.location).is_dir()


def locate(ref: str, *, option: str, gguf: bool) -> ModelSource:
    """Resolve the `<ref>` of `--provider <option>:<ref>` without loading or downloading anything. `gguf`: whether
    a .gguf file (or a folder holding one) is accepted, as the generator does; reward models need a folder.
    What is not a model is a one-line configuration error."""
    what = "a folder, a .gguf file or a hub id" if gguf else "a folder or a hub id"
    if not ref:
        raise ConfigError(f"--provider {option}:<path-or-id>: no model given ({what})")
    path = Path(ref).expanduser()
    if path.is_file():
        if not gguf:
            raise ConfigError(
                f"--provider {option}:{ref}: not a folder; pass the folder that holds config.json"
            )
        if path.suffix.lower() != ".gguf":
            raise ConfigError(
                f"--provider {option}:{ref}: a file must be a .gguf model; else give its folder"
            )
        return ModelSource(str(path.resolve().parent), path.name)
    if path.is_dir():
        ggufs = sorted(p.name for p in path.glob("*.gguf")) if gguf else []
        if (path / "config.json").is_file() or not gguf:
            # A reward-model folder without config.json is reported by the loader, which says what it lacks.
            return ModelSource(str(path.resolve()))
        if len(ggufs) == 1:
            return ModelSource(str(path.resolve()), ggufs[0])
        found = (
            f"several .gguf files ({', '.join(ggufs)}): name one" if ggufs else "no config.json or .gguf file"
        )
        raise ConfigError(f"--provider {option}:{ref}: {found}")
    if not _HUB_ID.match(ref):
        raise ConfigError(f"--provider {option}:{ref}: no such {'file or folder' if gguf else 'folder'}")
    return ModelSource(ref)


def download(source: ModelSource, *, option: str) -> Path:
    """The folder holding `source`: itself, or the hub snapshot (downloaded when the hub answers)."""
    if source.is_local:
        return Path(source.location)
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(source.location))
    except Exception as error:  # offline mode, no network, unknown or gated repository: all end the same way
        reason = _first_line(error)
        raise ConfigError(
            f"--provider {option}:{source.location}: not a local folder, and the model needs a download from "
            f"the Hugging Face hub, which failed ({reason}); download it where there is network and pass its "
            f"local path, e.g. --provider {option}:/models/{source.location.split('/')[-1]}"
        ) from None


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split("\n")[:1]).strip() or type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def fingerprint(source: ModelSource, memo: ResponseCache | None = None) -> str:
    """A hash identifying the model's files. A GGUF file is hashed alone; a hub snapshot is identified by its
    commit; any other folder by the content of every file in it (weights, config, tokenizer, template). A hub id
    not in the local hub cache is named as such (loading it will say what is missing). Hashing gigabytes takes
    a while, so each file's hash is remembered in `memo` under its path, size and modification time."""
    if source.gguf_file is not None:
        return f"sha256:{_file_sha256(Path(source.location) / source.gguf_file, memo)}"
    folder = Path(source.location)
    if not folder.is_dir():
        try:
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(source.location, local_files_only=True))
        except Exception:
            return f"hub:{source.location}"
    resolved = folder.resolve()
    if _SNAPSHOT_DIR.match(resolved.name) and resolved.parent.name == "snapshots":
        return f"revision:{resolved.name}"
    digest = hashlib.sha256()
    for file in sorted(_model_files(resolved)):
        relative = file.relative_to(resolved).as_posix()
        digest.update(f"{relative}\0{_file_sha256(file, memo)}\0".encode())
    return f"sha256:{digest.hexdigest()}"


def _model_files(folder: Path) -> list[Path]:
    files = []
    for file in folder.rglob("*"):
        parts = file.relative_to(folder).parts
        if any(part.startswith(".") for part in parts) or "__pycache__" in parts:
            continue
        if file.is_file() and not file.name.endswith(_IGNORED_SUFFIXES):
            files.append(file)
    return files


def _file_sha256(file: Path, memo: ResponseCache | None) -> str:
    real = file.resolve()
    stat = real.stat()
    key = cache_key("file-sha256", path=str(real), size=stat.st_size, mtime_ns=stat.st_mtime_ns)
    if memo is not None and (known := memo.get(key)) is not None:
        return str(known["sha256"])
    digest = hashlib.sha256()
    with real.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    if memo is not None:
        memo.set(key, {"sha256": digest.hexdigest()})
    return digest.hexdigest()
