"""PersonaMem (bowen-upenn/PersonaMem, arXiv 2504.14225) through its card: best-of-4 over long multi-session
histories.

    questions_<size>.csv           one question per row: persona_id, question_id, question_type, topic,
                                   user_question_or_message, correct_answer ("(c)"), all_options (a list of the
                                   four options "(a) ...", written as a JSON or Python list), shared_context_id,
                                   end_index_in_shared_context (how much of the context precedes the question)
    shared_contexts_<size>.jsonl   one line per context: {shared_context_id: [{role, content}, ...]}

<size> is 32k, 128k or 1M (the context's length in tokens); each size is a subset of its own. A question is one
item: its four options, the correct one preferred (chance 25%). The user is the persona; what they said and were
told before the question (the context up to `end_index_in_shared_context`, system messages left out) is their
profile, shown as past posts ranked by relevance to the question: a judge sees the `--profile-k` most relevant
turns, not the whole context (up to a million tokens). Questions have no split: every one is judged. The
question's type and topic are groups.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from prbj.data.cards import Card
from prbj.data.dataset import Blob, blob_records
from prbj.data.loader_output import Mapped
from prbj.data.per_user import ReadOptions
from prbj.data.schema import ProfilePost
from prbj.data.validate import Location, RecordError, _mapping, _type_name, parsed
from prbj.errors import DataError

_QUESTIONS = re.compile(r"^questions_(?P<size>[^./]+)\.(csv|jsonl|parquet)$")
_CONTEXTS = re.compile(r"^shared_contexts_(?P<size>[^./]+)\.jsonl$")
_LABEL = re.compile(r"^\s*\(?([a-zA-Z])\)\s*")
_OPTION_LETTERS = "abcdefghij"


def wanted(name: str) -> bool:
    """The published files: questions_<size>.csv and shared_contexts_<size>.jsonl."""
    base = PurePosixPath(name.replace("\\", "/")).name
    return bool(_QUESTIONS.match(base) or _CONTEXTS.match(base))


def _size(blob: Blob, pattern: re.Pattern[str]) -> str | None:
    match = pattern.match(PurePosixPath(blob.name).name)
    return match.group("size") if match else None


def _options(value: Any) -> list[str]:
    """The options of a row, their "(a) " labels taken off (the judge is never shown the file's order)."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                raise RecordError(
                    "all_options", "expected a list of options (JSON or Python), got text"
                ) from None
    if not isinstance(value, list | tuple) or len(value) < 2:
        raise RecordError("all_options", f"expected a list of at least 2 options, got {_type_name(value)}")
    options = []
    for i, option in enumerate(value):
        if not isinstance(option, str) or not option.strip():
            raise RecordError(f"all_options[{i}]", f"expected a non-empty string, got {_type_name(option)}")
        options.append(_LABEL.sub("", option, count=1).strip() or option.strip())
    return options


def _answer_index(value: Any, count: int) -> int:
    """`(c)`, `c` or `C` → 2."""
    letter = value.strip().strip("()").strip().lower() if isinstance(value, str) else ""
    index = _OPTION_LETTERS.find(letter) if len(letter) == 1 else -1
    if not 0 <= index < count:
        raise RecordError(
            "correct_answer",
            f"expected the option's letter, (a) to ({_OPTION_LETTERS[count - 1]}), got {value!r}",
        )
    return index


def _contexts(blobs: Sequence[Blob]) -> dict[tuple[str, str], list[ProfilePost]]:
    """Each context's turns as posts (system messages left out), by (size, shared_context_id)."""
    contexts: dict[tuple[str, str], list[ProfilePost]] = {}
    for size, read in parsed(_sized(blobs, _CONTEXTS), lambda _, sized: (sized[0], _context(sized[1]))):
        for context_id, posts in read:
            contexts[(size, context_id)] = posts
    return contexts


def _sized(blobs: Sequence[Blob], pattern: re.Pattern[str]) -> Iterator[tuple[Location, tuple[str, Any]]]:
    """The records of `blobs`, each with its file's size (the `<size>` of its name)."""
    for blob in blobs:
        size = _size(blob, pattern)
        assert size is not None
        for location, record in blob_records(blob):
            yield location, (size, record)


def _context(record: Any) -> list[tuple[str, list[ProfilePost]]]:
    """A shared-contexts record: each of its contexts' turns as posts, by shared_context_id."""
    read: list[tuple[str, list[ProfilePost]]] = []
    for context_id, turns in _mapping(record, "record").items():
        if not isinstance(turns, list):
            raise RecordError(context_id, f"expected a list of turns, got {_type_name(turns)}")
        posts: list[ProfilePost] = []
        for n, turn in enumerate(turns):
            role = turn.get("role") if isinstance(turn, Mapping) else None
            content = turn.get("content") if isinstance(turn, Mapping) else None
            if not isinstance(content, str):
                raise RecordError(
                    f"{context_id}[{n}].content", f"expected a string, got {_type_name(content)}"
                )
            # Kept by position, so that a question's end index counts turns as the file does.
            posts.append(ProfilePost(f"turn-{n}", str(role or ""), content))
        read.append((str(context_id), posts))
    return read


def _visible(posts: list[ProfilePost], end: int) -> tuple[ProfilePost, ...]:
    return tuple(p for p in posts[:end] if p.category != "system" and p.text.strip())


def read_personamem(card: Card, blobs: Sequence[Blob]) -> Mapped:
    questions = [b for b in blobs if _size(b, _QUESTIONS) is not None]
    if not questions:
        raise DataError(
            "personamem: no questions file (questions_<size>.csv) among: "
            + (", ".join(b.name for b in blobs) or "none")
        )
    contexts = _contexts([b for b in blobs if _size(b, _CONTEXTS) is not None])
    shown: dict[tuple[str, str, int], tuple[ProfilePost, ...]] = {}
    records = parsed(
        _sized(questions, _QUESTIONS),
        lambda location, sized: (location, _record(sized[1], sized[0], contexts, shown)),
    )
    return Mapped(records, ReadOptions(split_map=card.split_map))


def _record(
    row: Any,
    size: str,
    contexts: Mapping[tuple[str, str], list[ProfilePost]],
    shown: dict[tuple[str, str, int], tuple[ProfilePost, ...]],
) -> dict[str, Any]:
    row = _mapping(row, "record")
    options = _options(row.get("all_options"))
    preferred = _answer_index(row.get("correct_answer"), len(options))
    context_id = str(row.get("shared_context_id") or "")
    posts = contexts.get((size, context_id))
    if posts is None:
        raise RecordError("shared_context_id", f"no context {context_id!r} in shared_contexts_{size}.jsonl")
    try:
        end = int(str(row.get("end_index_in_shared_context")).strip())
    except ValueError:
        raise RecordError("end_index_in_shared_context", "expected a whole number") from None
    # Questions of one context share their posts: the tuple up to each end index is made once.
    key = (size, context_id, end)
    if key not in shown:
        shown[key] = _visible(posts, end)
    question_id = row.get("question_id")
    return {
        "user_id": row.get("persona_id"),
        "id": f"{size}-{question_id}" if question_id not in (None, "") else None,
        "prompt": row.get("user_question_or_message"),
        "responses": options,
        "preferred": preferred,
        "subset": size,
        "posts": shown[key],
        "groups": {"question_type": row.get("question_type"), "topic": row.get("topic")},
        "split": "test",
    }
