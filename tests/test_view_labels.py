"""labels.jsonl as untrusted input and as an append-only log, and the marks the pair page puts on a reply."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from prbj.data.labels import Label, human_preference, latest_labels, parse_label_lines
from prbj.errors import DataError
from prbj.runs import rundir
from prbj.view.marks import mark_reply


def _label(
    pair: str, preference: str, reviewer: str = "ann", time: str = "2026-01-01T00:00:00+00:00"
) -> Label:
    return Label(pair, preference, reviewer, time, shown_as_a="chosen")  # type: ignore[arg-type]


def test_a_bad_line_is_named_by_file_line_and_field(tmp_path: Path) -> None:
    good = _label("p1", "chosen").line()
    with pytest.raises(DataError, match=r"labels.jsonl:2: field 'preference'"):
        parse_label_lines("labels.jsonl", good + '{"pair_id": "p2", "preference": "maybe"}\n')
    with pytest.raises(DataError, match=r"labels.jsonl:1: invalid JSON"):
        parse_label_lines("labels.jsonl", "{oops\n")
    with pytest.raises(DataError, match=r":1: field 'reviewer'"):
        parse_label_lines("x", '{"pair_id": "p", "preference": "chosen", "reviewer": "", "time": "t"}\n')


def test_a_torn_last_line_is_no_label_and_the_next_append_cuts_it(tmp_path: Path) -> None:
    path = tmp_path / rundir.LABELS_FILE
    path.write_text(_label("p1", "chosen").line() + '{"pair_id": "p2", "pref', encoding="utf-8")
    assert [lb.pair_id for lb in rundir.read_labels(tmp_path)] == ["p1"]
    rundir.append_label(tmp_path, _label("p3", "rejected"))
    assert [lb.pair_id for lb in rundir.read_labels(tmp_path)] == ["p1", "p3"]
    assert path.read_text(encoding="utf-8").count("\n") == 2


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    note = "x" * 5000  # longer than one pipe buffer: only the lock keeps lines whole

    def write(reviewer: str) -> None:
        for i in range(40):
            rundir.append_label(tmp_path, Label(f"p{i}", "chosen", reviewer, "t", note=note))

    threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b", "c")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    labels = rundir.read_labels(tmp_path)
    assert len(labels) == 120 and all(label.note == note for label in labels)


def test_the_latest_label_of_a_reviewer_wins_and_reviewers_vote() -> None:
    labels = [
        _label("p1", "rejected", "ann"),
        _label("p1", "chosen", "ann"),
        _label("p1", "chosen", "bob"),
        _label("p2", "chosen", "ann"),
        _label("p2", "rejected", "bob"),
        _label("p3", "cant_tell", "ann"),
    ]
    assert latest_labels(labels)[("p1", "ann")].preference == "chosen"
    assert human_preference(labels) == {"p1": "chosen", "p2": "cant_tell", "p3": "cant_tell"}


def test_marks_follow_the_parser_on_the_reply_as_written() -> None:
    answers = ["Film is cheap. Result: B", "Digital is fast."]
    reply = "<think>A or B?</think>I quote: Film is cheap. Result: B\nSo the verdict: **Result:** A\n"
    pieces = {piece.text: piece.marks for piece in mark_reply(reply, answers)}
    assert pieces["<think>A or B?</think>"] == ("reasoning",)
    assert pieces["Film is cheap. Result: B"] == ("quote",)  # a verdict inside a quoted answer is not read
    assert pieces["Result:** A"] == ("verdict",)
    assert "".join(piece.text for piece in mark_reply(reply, answers)) == reply
    bare = mark_reply("Both are fine.\nB", answers)
    assert bare[-1].text == "B" and bare[-1].marks == ("verdict",)
    assert all(not piece.marks for piece in mark_reply("No verdict here.", answers))


@pytest.mark.parametrize(
    "reply",
    [
        "Result: A\nOn reflection the second answer fits this user better.\nResult: B",
        "Verdict: B\nResult: A",
        "Result: B. Wait, no.\nResult: A",
    ],
)
def test_of_two_verdicts_the_mark_is_on_the_last_as_the_parser_reads(reply: str) -> None:
    from prbj.judges.verdict import parse_verdict

    answers = ["A used rangefinder.", "A new mirrorless camera."]
    read = parse_verdict(reply, answers)
    (marked,) = [piece for piece in mark_reply(reply, answers) if "verdict" in piece.marks]
    last_line = reply.splitlines()[-1]
    assert read == last_line[-1] and marked.text == last_line
    assert reply.rindex(marked.text) == len(reply) - len(last_line)
