"""Find a local model's folder (a path, or a hub id already in the Hugging Face cache) and fingerprint it.

The fingerprint goes into cache keys: a score computed with other weights, another tokenizer or another chat
template must never be served from the cache. It needs no torch, so a rerun can be checked against the cache
before any model is loaded.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from prbj.errors import ConfigError
from prbj.llm.cache import ResponseCache, cache_key

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SNAPSHOT_DIR = re.compile(r"^[0-9a-f]{40}$")
# Files that cannot change a score: documentation and VCS or tool metadata.
_IGNORED_SUFFIXES = (".md",)
_CHUNK = 1 << 24


def locate_model(ref: str) -> Path:
    """The folder holding `ref`: a local folder, else a Hugging Face hub id (downloaded when the hub answers).
    Raises ConfigError with one line when neither works."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise ConfigError(f"--provider hf:{ref}: not a folder; pass the folder that holds config.json")
    if not _HUB_ID.match(ref):
        raise ConfigError(f"--provider hf:{ref}: no such folder")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(ref))
    except Exception as error:  # offline mode, no network, unknown or gated repository: all end the same way
        reason = _first_line(error)
        raise ConfigError(
            f"--provider hf:{ref}: not a local folder, and the model needs a download from the Hugging Face "
            f"hub, which failed ({reason}); download it where there is network and pass its local path, "
            f"e.g. --provider hf:/models/{ref.split('/')[-1]}"
        ) from None


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split("\n")[:1]).strip() or type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def model_fingerprint(folder: Path, memo: ResponseCache | None = None) -> str:
    """A hash identifying the model's files. A hub snapshot is identified by its commit; any other folder by
    the content of every file in it (weights, config, tokenizer, template). Hashing gigabytes takes a while,
    so each file's hash is remembered in `memo` under its path, size and modification time."""
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
