"""Human labels of a run's pairs: which answer fits the user better, by whom and when.

A reviewer labels a pair in `prbj view`; each label is one JSON line appended to the run directory's
labels.jsonl (runs.rundir owns the file). A later label by the same reviewer on the same pair replaces the
earlier one, so the file is a log and `latest_labels` its current state. Labels are kept in chosen/rejected
terms, with the answer the reviewer saw as A, so that agreement can be measured both against the benchmark's
label and between reviewers. The file may come from elsewhere: every line is checked, and a bad one is named by
file, line and field.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from prbj.data.files import json_problem
from prbj.errors import DataError

Preference = Literal["chosen", "rejected", "cant_tell"]
PREFERENCES: tuple[Preference, ...] = get_args(Preference)
ANSWERS = ("chosen", "rejected")
# Notes and names are free text, but bounded: a label is a line a person wrote. A pair id is the dataset's, as
# long as `prbj judge` took it (any length): a label may name every pair a run holds.
MAX_NOTE_CHARS = 10_000
MAX_NAME_CHARS = 200


@dataclass(frozen=True)
class Label:
    pair_id: str
    preference: Preference
    reviewer: str
    time: str  # ISO 8601, UTC
    note: str = ""
    # The answer the reviewer saw as A ("chosen" or "rejected"); the slot they picked follows from it.
    shown_as_a: str | None = None
    run_id: str | None = None

    def record(self) -> dict[str, Any]:
        return {
            "pair_id": self.pair_id,
            "preference": self.preference,
            "reviewer": self.reviewer,
            "time": self.time,
            "note": self.note,
            "shown_as_a": self.shown_as_a,
            "run_id": self.run_id,
        }

    def line(self) -> str:
        return json.dumps(self.record(), ensure_ascii=False) + "\n"

    @property
    def slot(self) -> str | None:
        """The slot the reviewer picked ("A", "B"), None for can't tell or when the shown order is unknown."""
        if self.preference == "cant_tell" or self.shown_as_a is None:
            return None
        return "A" if self.preference == self.shown_as_a else "B"


def _text(
    record: Mapping[str, Any], field: str, where: str, *, limit: int | None, required: bool = True
) -> str:
    value = record.get(field)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise DataError(f"{where}: field '{field}': expected a non-empty string")
    if limit is not None and len(value) > limit:
        raise DataError(f"{where}: field '{field}': longer than {limit} characters")
    return value


def check_reviewer(name: str, where: str) -> str:
    """A reviewer's name as a label records it, or the DataError the label reader would raise for it."""
    return _text({"reviewer": name}, "reviewer", where, limit=MAX_NAME_CHARS)


def checked(label: Label, where: str) -> Label:
    """The label if the reader would take it back (parse_label's rules, the one definition), else its DataError:
    the writer checks with this, so that it never writes a line that makes the file unreadable."""
    return parse_label(label.record(), where)


def parse_label(record: Any, where: str) -> Label:
    """One label from a decoded JSON line; `where` is "file:line" for the error message."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object")
    preference = record.get("preference")
    if preference not in PREFERENCES:
        raise DataError(f"{where}: field 'preference': expected one of {', '.join(PREFERENCES)}")
    shown = record.get("shown_as_a")
    if shown is not None and shown not in ANSWERS:
        raise DataError(f"{where}: field 'shown_as_a': expected chosen, rejected or null")
    run_id = record.get("run_id")
    if run_id is not None and not isinstance(run_id, str):
        raise DataError(f"{where}: field 'run_id': expected a string or null")
    return Label(
        pair_id=_text(record, "pair_id", where, limit=None),
        preference=preference,
        reviewer=_text(record, "reviewer", where, limit=MAX_NAME_CHARS),
        time=_text(record, "time", where, limit=MAX_NAME_CHARS),
        note=_text(record, "note", where, limit=MAX_NOTE_CHARS, required=False),
        shown_as_a=shown,
        run_id=run_id,
    )


def parse_label_lines(name: str, text: str) -> list[Label]:
    """Labels from the text of a labels.jsonl. A last line without its newline is an append that was cut
    short (the writer died mid-line): it was never a label, and is left out."""
    lines = text.split("\n")
    complete = lines[:-1]  # the part after the last newline is empty, or a torn append
    labels = []
    for number, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{name}:{number}: invalid JSON: {json_problem(err, with_line=False)}") from None
        labels.append(parse_label(record, f"{name}:{number}"))
    return labels


def latest_labels(labels: Iterable[Label]) -> dict[tuple[str, str], Label]:
    """The current label of each (pair, reviewer): the last one written."""
    current: dict[tuple[str, str], Label] = {}
    for label in labels:
        current[(label.pair_id, label.reviewer)] = label
    return current


def human_preference(labels: Iterable[Label]) -> dict[str, Preference]:
    """Per pair, what the reviewers' current labels say together: the answer most of them prefer, or
    `cant_tell` when they split evenly or could not tell. Human ground truth where present (calibration)."""
    votes: dict[str, Counter[str]] = {}
    for label in latest_labels(labels).values():
        if label.preference != "cant_tell":
            votes.setdefault(label.pair_id, Counter())[label.preference] += 1
        else:
            votes.setdefault(label.pair_id, Counter())
    result: dict[str, Preference] = {}
    for pair_id, counts in votes.items():
        chosen, rejected = counts["chosen"], counts["rejected"]
        result[pair_id] = "chosen" if chosen > rejected else "rejected" if rejected > chosen else "cant_tell"
    return result
