"""The per-user preference layout: recognised by its user_id, only test rows judged, each user's train and val
rows their history (in order, never another user's or a test row), conversations rendered for judges, hub
folders read with every split, and bad rows refused with one line naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from per_user_fixture import HISTORY_ROWS, TEST_ROWS, USERS, history_marker, user_records

from conftest import write_jsonl
from prbj.cli import main
from prbj.data import load_dataset
from prbj.data.per_user import render_conversation
from prbj.errors import DataError


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "users.jsonl", user_records())


def test_records_with_a_user_id_are_read_as_users_and_only_test_rows_are_judged(users_file: Path) -> None:
    data = load_dataset(str(users_file))
    assert data.benchmark == "per-user"
    assert len(data.pairs) == len(USERS) * TEST_ROWS
    assert data.history_rows == len(USERS) * HISTORY_ROWS
    assert data.users == len(USERS)
    assert [p.id for p in data.pairs[:2]] == ["u1-test-1", "u1-test-2"]
    for pair in data.pairs:
        # The user's own train and val rows, oldest first; nothing of another user, no test row.
        assert [h.prompt.split()[0] for h in pair.history] == [
            history_marker(pair.user_id, n) for n in range(1, HISTORY_ROWS + 1)
        ]
        assert pair.persona == f"PERSONA{pair.user_id} a hobby photographer"
        assert pair.facts == (("budget", f"FACT{pair.user_id} small"),)
    first = data.pairs[0]
    assert first.groups == (("age", "18-34"),) and first.seen is True and data.pairs[-1].seen is False
    # Records without an id are numbered per user.
    assert first.history[0].id == "u1:1"
    # A chosen answer given as a {role, content} turn is its content.
    assert first.chosen == "TESTu1t1answer a bright prime lens"


def test_a_conversation_is_the_judges_question_with_the_last_user_turn_last(users_file: Path) -> None:
    pair = load_dataset(str(users_file)).pairs[0]
    assert pair.turns == (
        ("user", "TESTu1t1 I want to shoot portraits"),
        ("assistant", "What camera do you have?"),
        ("user", "TESTu1t1 an old film camera, which lens now"),
    )
    assert pair.question == (
        "User: TESTu1t1 I want to shoot portraits\n\nAssistant: What camera do you have?\n\n"
        "User: TESTu1t1 an old film camera, which lens now"
    )
    assert pair.question.endswith(pair.turns[-1][1])
    # A single user turn is the question as it is.
    assert render_conversation([("user", "Just this?")]) == "Just this?"


def test_benchmark_records_without_users_stay_personalized_rewardbench(small_dataset: Path) -> None:
    data = load_dataset(str(small_dataset))
    assert data.benchmark == "prb" and data.history_rows == 0
    assert all(p.user_id == p.id and p.user_profile.only_posts for p in data.pairs)


def test_a_hub_folder_is_read_with_every_split_by_file_name(tmp_path: Path) -> None:
    """A per-user hub snapshot keeps train, validation and test in files of their own: all of them are read
    (train and validation rows are histories), and a row's own split column wins over its file's name."""
    rows = user_records(("u1", "u2"))
    folder = tmp_path / "hub" / "data"
    folder.mkdir(parents=True)
    for split, wanted in (("train", ("train",)), ("validation", ("val",)), ("test", ("test",))):
        chosen = [{k: v for k, v in r.items() if k != "split"} for r in rows if r["split"] in wanted]
        write_jsonl(folder / f"{split}-00000-of-00001.jsonl", chosen)
    data = load_dataset(str(tmp_path / "hub"))
    assert len(data.pairs) == 4 and data.history_rows == 8
    assert [h.id for h in data.pairs[0].history] == ["u1:1", "u1:2", "u1:3", "u1:4"]
    # An explicit split column wins over the file's name: one more judged row, one fewer in the history.
    moved = {**rows[0], "id": "moved", "split": "test"}
    write_jsonl(folder / "train-00001-of-00001.jsonl", [moved])
    again = load_dataset(str(tmp_path / "hub"))
    assert "moved" in {p.id for p in again.pairs} and again.history_rows == 8


def test_a_per_user_parquet_file_reads_like_its_jsonl(tmp_path: Path) -> None:
    records = user_records(("u1", "u2"))
    flat = [
        {**r, "chosen": r["chosen"] if isinstance(r["chosen"], str) else r["chosen"]["content"]}
        for r in records
    ]
    for record in flat:
        record.setdefault("context", None)
        record.setdefault("prompt", None)
        record.setdefault("id", None)
        record.setdefault("groups", None)
        record.setdefault("seen", None)
        record.setdefault("persona", None)
        record.setdefault("facts", None)
    pl.DataFrame(flat).write_parquet(tmp_path / "users.parquet")
    from_parquet = load_dataset(str(tmp_path / "users.parquet"))
    from_jsonl = load_dataset(str(write_jsonl(tmp_path / "users.jsonl", records)))
    assert [(p.id, p.question, p.chosen, p.history) for p in from_parquet.pairs] == [
        (p.id, p.question, p.chosen, p.history) for p in from_jsonl.pairs
    ]


BAD_ROWS = [
    ({"prompt": None, "context": None}, "field 'prompt': missing"),
    ({"split": "holdout"}, "field 'split': unknown value 'holdout'; values found that are not train, val or test"),
    ({"chosen": {"role": "user", "content": "x"}}, "field 'chosen.role': an answer is the assistant's turn"),
    ({"rejected": 7}, "field 'rejected': expected a string, got int"),
    ({"user_id": ""}, "field 'user_id': is empty"),
    ({"groups": ["a"]}, "field 'groups': expected an object, got list"),
    ({"seen": "yes"}, "field 'seen': expected true or false, got str"),
    ({"subset": "all"}, "field 'subset': 'all' names every subset together"),
    ({"context": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes?"}], "prompt": None},
     "field 'context[1].role': the last turn must be the user's"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), BAD_ROWS)
def test_a_bad_row_is_one_line_naming_file_line_and_field(tmp_path: Path, change: dict, message: str) -> None:
    records = user_records(("u1",))
    records[2] = {k: v for k, v in {**records[2], **change}.items() if v is not None}
    path = write_jsonl(tmp_path / "bad.jsonl", records)
    with pytest.raises(DataError) as caught:
        load_dataset(str(path))
    assert str(caught.value).startswith(f"{path}:3: {message}")
    # Through the command line: exit 2 and the same one line.
    result = CliRunner().invoke(main, ["judge", "--dataset", str(path), "-p", "length", "--no-progress"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[0].startswith(f"error: {path}:3:")


def test_records_of_one_user_may_not_disagree_about_who_the_user_is(tmp_path: Path) -> None:
    records = user_records(("u1",))
    records[3]["persona"] = "someone else entirely"
    path = write_jsonl(tmp_path / "users.jsonl", records)
    with pytest.raises(
        DataError, match=rf"{path}:4: field 'persona': user 'u1' has another persona at {path}:1"
    ):
        load_dataset(str(path))


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    records = user_records(("u1",))
    records[-1]["id"] = records[-2]["id"]
    path = write_jsonl(tmp_path / "users.jsonl", records)
    with pytest.raises(DataError, match=r"field 'id': duplicate id 'u1-test-1'"):
        load_dataset(str(path))


def test_best_of_n_refuses_per_user_data_it_could_not_grade(users_file: Path, tmp_path: Path) -> None:
    args = [
        "bon",
        "sample",
        "--policy",
        "demo",
        "--n",
        "2",
        "--dataset",
        str(users_file),
        "--out",
        str(tmp_path),
    ]
    result = CliRunner().invoke(main, [*args, "--no-progress"])
    assert result.exit_code == 2
    assert "per-user data has no rubric aspects to grade best-of-N picks with" in result.output
