"""LaMP-QA-format records, the input of `prbj build`: a question, the asker's past posts and the gold rubric,
but no answers yet. Loaded from JSONL/JSON/Parquet files, folders, or `hf:alireza7/LaMP-QA`; validated with the
same file:line:field errors (and the same field helpers) as benchmark pairs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from prbj.data.loaders import HF_PREFIX, match_subset, records_from_files
from prbj.data.schema import SUBSETS, Context, JudgeView, ProfilePost, RubricAspect, UserProfile
from prbj.data.validate import (
    Location,
    RecordError,
    _identifier,
    _mapping,
    _profile,
    _rubric,
    _string,
    _summarise,
)
from prbj.errors import DataError

LAMP_QA_HF_DATASET = "alireza7/LaMP-QA"
# Records shipped with prbj to try `prbj build` on (examples/lamp_qa.jsonl, made up), by fingerprint: public, as
# the published benchmarks are (prbj.data.loaders.is_public). An edited copy is someone's own data.
SHIPPED_FINGERPRINTS = frozenset({"210390c0a62b80ff"})
SPLITS = ("train", "validation", "test")
_SUFFIXES = {".jsonl", ".json", ".parquet"}


@dataclass(frozen=True, slots=True)
class LampRecord:
    id: str
    category: str
    question: str
    profile: tuple[ProfilePost, ...]
    narrative: str
    rubric_aspects: tuple[RubricAspect, ...]

    def view(self, context: Context = "profile") -> JudgeView:
        """What the planner and generators may read: question and profile, never the gold rubric."""
        return JudgeView(
            pair_id=self.id,
            subset=self.category,
            question=self.question,
            profile=self.profile if context != "none" else (),
            context=context,
        )

    @property
    def user_profile(self) -> UserProfile:
        """The asker's past posts: all a LaMP-QA record knows of its user (read as a Pair's profile is)."""
        return UserProfile(posts=self.profile)

    def with_user_profile(self, profile: UserProfile) -> LampRecord:
        return replace(self, profile=profile.posts)


@dataclass(frozen=True)
class LampSet:
    source: str
    records: tuple[LampRecord, ...]

    @property
    def subsets(self) -> list[str]:
        return sorted({r.category for r in self.records})

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for record in sorted(self.records, key=lambda r: r.id):
            digest.update(json.dumps(asdict(record), sort_keys=True, ensure_ascii=False).encode())
        return digest.hexdigest()[:16]

    def select(self, subsets: Sequence[str] = (), limit: int | None = None) -> LampSet:
        """The named subsets (all when none), then the first `limit` records of each."""
        records = list(self.records)
        if subsets:
            wanted = {match_subset(name, self.subsets) for name in subsets}
            records = [r for r in records if r.category in wanted]
        if limit is not None:
            taken: dict[str, int] = {}
            kept = []
            for record in records:
                if taken.get(record.category, 0) < limit:
                    taken[record.category] = taken.get(record.category, 0) + 1
                    kept.append(record)
            records = kept
        return LampSet(self.source, tuple(records))


def parse_lamp_record(record: Any, default_category: str | None = None) -> LampRecord:
    """One raw record to a LampRecord; raises RecordError naming the field. Hub files keep the subset in the
    folder name rather than in each record, so `default_category` fills a missing `category`."""
    record = _mapping(record, "record")
    if record.get("category") in (None, "") and default_category:
        category = default_category
    else:
        category = _string(record, "category", nonempty=True)
    return LampRecord(
        id=_identifier(record, "id"),
        category=category,
        question=_string(record, "question", nonempty=True),
        profile=_profile(record),
        narrative=_string(record, "narrative", required=False),
        rubric_aspects=_rubric(record),
    )


def validate_lamp_records(records: Iterable[tuple[Location, Any, str | None]]) -> list[LampRecord]:
    """Parse every record; one DataError whose first line names the first problem (file:line: field '...')."""
    parsed: list[LampRecord] = []
    seen: dict[str, Location] = {}
    problems: list[str] = []
    for location, raw, default_category in records:
        try:
            record = parse_lamp_record(raw, default_category)
        except RecordError as err:
            hint = " (or name the subset with --subset)" if "'category': missing" in str(err) else ""
            problems.append(f"{location}: {err}{hint}")
            continue
        if record.id in seen:
            problems.append(
                f"{location}: field 'id': duplicate id {record.id!r} (first seen at {seen[record.id]})"
            )
            continue
        seen[record.id] = location
        parsed.append(record)
    if problems:
        raise DataError(_summarise(problems))
    return parsed


def load_lamp(spec: str, *, subsets: Sequence[str] = (), split: str = "test") -> LampSet:
    """`spec`: a .jsonl/.json/.parquet file, a folder of them, or `hf:<repo>` (default repo alireza7/LaMP-QA).

    A folder laid out as the hub publishes it (`<subset>/<split>-*.parquet`) is read for `split`; a file or folder
    inside a subset-named folder gives its records that subset when they carry no `category`."""
    single = subsets[0] if len(subsets) == 1 else None
    default = match_subset(single, SUBSETS) if single and _is_known_subset(single) else single
    if spec.startswith(HF_PREFIX):
        folder = _fetch_hf(spec[len(HF_PREFIX) :] or LAMP_QA_HF_DATASET, subsets, split)
        files = _split_files(folder, split)
        return LampSet(spec, tuple(validate_lamp_records(_with_categories(files, default))))
    path = Path(spec)
    if not path.exists():
        raise DataError(f"--input {spec}: no such file or folder")
    files = _split_files(path, split) if path.is_dir() else [path]
    return LampSet(str(path), tuple(validate_lamp_records(_with_categories(files, default))))


def _is_known_subset(name: str) -> bool:
    try:
        match_subset(name, SUBSETS)
    except DataError:
        return False
    return True


def _subset_in_path(path: Path) -> str | None:
    names = {s.lower(): s for s in SUBSETS}
    for part in reversed(path.parts):
        if part.lower() in names:
            return names[part.lower()]
    return None


def _with_categories(
    files: Sequence[Path], default: str | None
) -> Iterator[tuple[Location, Any, str | None]]:
    for path in files:
        category = _subset_in_path(path) or default
        for location, record in records_from_files([path]):
            yield location, record, category


def _split_files(folder: Path, split: str) -> list[Path]:
    """Data files of a folder; when some are named for a split (`test-0000.parquet`, `test/…`), only `split`'s."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
    files = [p for p in files if p.name != "dataset_infos.json"]
    if not files:
        raise DataError(f"--input {folder}: no .jsonl, .json or .parquet files in this folder")

    def split_of(path: Path) -> str | None:
        stem = path.stem.lower()
        for name in SPLITS:
            if (
                stem == name
                or stem.startswith((f"{name}-", f"{name}_", f"{name}."))
                or name in (part.lower() for part in path.relative_to(folder).parts[:-1])
            ):
                return name
        return None

    named = [p for p in files if split_of(p) is not None]
    if not named:
        return files
    chosen = [p for p in named if split_of(p) == split]
    if not chosen:
        found = sorted({split_of(p) or "" for p in named})
        raise DataError(f"--split {split}: no such split in {folder} (found: {', '.join(found)})")
    return chosen


def _fetch_hf(repo_id: str, subsets: Sequence[str], split: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        wanted = [match_subset(s, SUBSETS) for s in subsets if _is_known_subset(s)]
        allow = [f"{s}/*{split}*" for s in wanted] or [f"*{split}*"]
        folder = snapshot_download(repo_id=repo_id, repo_type="dataset", allow_patterns=allow)
    except Exception as err:  # network, auth and missing-repo errors all end the same way for the user
        cause = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(
            f"--input hf:{repo_id}: could not fetch it from the Hugging Face hub ({type(err).__name__}: "
            f"{cause}). Without network access, download the files elsewhere and pass their folder or a "
            f"file with --input."
        ) from None
    return Path(folder)
