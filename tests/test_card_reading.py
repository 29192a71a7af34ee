"""Real files do not stop a benchmark (issue 41's defects 1-5): identical answers are dropped with a counted note
on every card; unknown split values are all named and a card maps them; PersonaFeedback is read by its published
paths; `has_history` is not `seen`; a card's column path indexes into lists. And the edges of issue 44: a card's
sample stays beside the card, hostile rows are one line, and the card's text is part of the data's fingerprint."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import write_jsonl
from prbj.cli import main
from prbj.data import load_dataset
from prbj.data.cards import read_card
from prbj.errors import ConfigError, DataError

ROOT = Path(__file__).resolve().parents[1]
PRISM_CARD = ROOT / "prbj" / "data" / "benchmarks" / "prism.toml"


def _card(path: Path, loader: str = "per-user", data: str = "", columns: str = "") -> Path:
    text = f'[benchmark]\nname = "mine"\nversion = "1"\n\n[data]\nloader = "{loader}"\n{data}\n'
    if columns:
        text += f"\n[columns]\n{columns}\n"
    path.write_text(text)
    return path


def _row(user: str, n: int, split: str = "test", **extra: object) -> dict[str, object]:
    return {
        "user_id": user,
        "prompt": f"question {n} of {user}",
        "chosen": f"the answer {user} liked {n}",
        "rejected": f"the answer {user} did not like {n}",
        "split": split,
        **extra,
    }


# --- 1. identical answers ------------------------------------------------------------------------------------


def test_identical_answers_are_dropped_and_counted_in_the_per_user_layout(tmp_path: Path) -> None:
    rows = [_row("u1", 1, "train"), _row("u1", 2), _row("u2", 3), _row("u2", 4, "train")]
    rows[1]["rejected"] = rows[1]["chosen"]  # a judged pair
    rows[3]["rejected"] = (
        " " + str(rows[3]["chosen"]) + "\n"
    )  # an earlier choice, the same text but for spaces
    data = load_dataset(str(write_jsonl(tmp_path / "users.jsonl", rows)))
    assert [p.id for p in data.pairs] == ["u2:1"]
    assert data.history_rows == 1
    assert data.notes == (
        "2 pairs of identical answers made no pair (dropped: a judge cannot prefer a text over itself)",
    )


def test_prism_drops_two_samples_of_one_text_rated_apart(tmp_path: Path) -> None:
    """PRISM's later turns are two samples of one model, and empty replies are written as `EMPTY STRING`: the same
    text rated 80 and 20 is real data, not a broken file."""
    folder = tmp_path / "prism"
    folder.mkdir()
    rows = []
    for n, (text, score) in enumerate((("EMPTY STRING", 80), ("EMPTY STRING", 20), ("A real answer.", 50))):
        rows.append(
            {
                "utterance_id": f"u-{n}",
                "conversation_id": "c1",
                "user_id": "user1",
                "turn": 0,
                "conversation_type": "unguided",
                "user_prompt": "Say something.",
                "model_response": text,
                "score": score,
                "if_chosen": n == 0,
            }
        )
    write_jsonl(folder / "utterances.jsonl", rows)
    data = load_dataset(str(folder), "prism")
    # 80 over 20 is the same text (dropped); 80 over 50 and 50 over 20 are pairs.
    assert len(data.pairs) == 2
    assert any("1 pair of identical answers made no pair" in note for note in data.notes)


def test_persona_feedback_drops_an_identical_pair_too(tmp_path: Path) -> None:
    (tmp_path / "persona").mkdir()
    (tmp_path / "persona" / "all_personas.jsonl").write_text('{"Name": "One"}\n')
    (tmp_path / "data" / "general").mkdir(parents=True)
    rows = [
        {"user_id": 1, "question": "q1?", "chosen": "same", "reject": "same"},
        {"user_id": 1, "question": "q2?", "chosen": "yes", "reject": "no"},
    ]
    write_jsonl(tmp_path / "data" / "general" / "easy.jsonl", rows)
    data = load_dataset(str(tmp_path), "persona-feedback")
    assert [p.id for p in data.pairs] == ["general-easy-2"]
    assert any("identical answers" in note for note in data.notes)


# --- 2. split values -----------------------------------------------------------------------------------------


def test_unknown_split_values_are_all_named_with_their_counts(tmp_path: Path) -> None:
    rows = [_row("u1", 1, "holdout"), _row("u1", 2, "train"), _row("u2", 3, "dev"), _row("u2", 4, "holdout")]
    path = write_jsonl(tmp_path / "users.jsonl", rows)
    with pytest.raises(DataError) as caught:
        load_dataset(str(path))
    message = str(caught.value)
    assert message.startswith(f"{path}:1: field 'split': unknown value 'holdout'")
    assert "'holdout' (2 rows), 'dev' (1 row)" in message and "split_map" in message
    assert "\n" not in message


def test_a_card_maps_split_values_and_drops_the_ones_it_says(tmp_path: Path) -> None:
    rows = [_row("u1", 1, "seen_train"), _row("u1", 2, "holdout"), _row("u1", 3, "dev"), _row("u1", 4, "0")]
    path = write_jsonl(tmp_path / "users.jsonl", rows)
    card = _card(
        tmp_path / "card.toml",
        data='split_map = { seen_train = "train", holdout = "test", dev = "drop", "0" = "val" }',
    )
    data = load_dataset(str(path), read_card(card))
    assert [p.id for p in data.pairs] == ["u1:2"]
    assert [h.id for h in data.pairs[0].history] == ["u1:1", "u1:4"]
    assert data.notes == ("1 row of a split the card's split_map drops left out",)
    # A value it maps to nothing prbj knows is refused with the card's line.
    card.write_text(card.read_text().replace('dev = "drop"', 'dev = "later"'))
    with pytest.raises(
        ConfigError, match=r"card.toml:\d+: field 'data.split_map.dev': expected one of train"
    ):
        read_card(card)


# --- 3. PersonaFeedback's published paths --------------------------------------------------------------------


def test_persona_feedback_reads_its_published_paths_by_name(tmp_path: Path) -> None:
    """A second persona file would swap users' personas if personas were read by line of any file; another data
    file (the hub holds ~200) would be read as pairs. Both are ignored, with a note."""
    (tmp_path / "persona").mkdir()
    (tmp_path / "persona" / "all_personas.jsonl").write_text('{"Name": "Ana"}\n{"Name": "Ben"}\n')
    (tmp_path / "persona" / "translated_personas.jsonl").write_text('{"Name": "Zoe"}\n{"Name": "Yan"}\n')
    (tmp_path / "data" / "general").mkdir(parents=True)
    (tmp_path / "data" / "spedific").mkdir()
    (tmp_path / "data" / "raw").mkdir()
    write_jsonl(
        tmp_path / "data" / "general" / "easy.jsonl",
        [{"user_id": 1, "question": "q?", "chosen": "a", "reject": "b"}],
    )
    write_jsonl(
        tmp_path / "data" / "spedific" / "hard.jsonl",
        [{"user_id": 2, "question": "r?", "chosen": "c", "reject": "d"}],
    )
    write_jsonl(tmp_path / "data" / "raw" / "annotations.jsonl", [{"annotator": "x", "label": 3}])
    data = load_dataset(str(tmp_path), "persona-feedback")
    by_id = {p.id: p for p in data.pairs}
    assert set(by_id) == {"general-easy-1", "specific-hard-1"}
    assert by_id["general-easy-1"].persona == "Name: Ana" and by_id["specific-hard-1"].persona == "Name: Ben"
    assert data.subsets == ["general", "specific"]
    assert any(
        note.startswith("2 files that the persona-feedback loader does not read ignored")
        for note in data.notes
    )
    # The shipped sample is laid out as the hub is, `spedific` included.
    assert (ROOT / "prbj" / "data" / "benchmarks" / "persona-feedback" / "data" / "spedific").is_dir()


# --- 4. has_history is not seen ------------------------------------------------------------------------------


def test_prism_users_with_only_tied_earlier_choices_have_no_history_and_nobody_is_seen(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "prism"
    folder.mkdir()
    rows = []
    # user1's first conversation rates 50 and 52 (a tie within 5 points), the second 90 and 10.
    for conversation, scores in (("c1", (50, 52)), ("c2", (90, 10))):
        for n, score in enumerate(scores):
            rows.append(
                {
                    "utterance_id": f"{conversation}-{n}",
                    "conversation_id": conversation,
                    "user_id": "user1",
                    "turn": 0,
                    "user_prompt": f"prompt of {conversation}",
                    "model_response": f"answer {n} in {conversation}",
                    "score": score,
                    "if_chosen": n == 0,
                }
            )
    write_jsonl(folder / "utterances.jsonl", rows)
    (pair,) = load_dataset(str(folder), "prism").pairs
    assert pair.history == () and dict(pair.groups)["has_history"] == "no"
    assert pair.seen is None  # PRISM does not say which users trained a model


def test_seen_is_kept_where_the_data_declares_it(tmp_path: Path) -> None:
    rows = [_row("u1", 1, seen=True), _row("u2", 2, seen=False), _row("u3", 3)]
    data = load_dataset(str(write_jsonl(tmp_path / "users.jsonl", rows)))
    assert [p.seen for p in data.pairs] == [True, False, None]
    assert all("has_history" not in dict(p.groups) for p in data.pairs)


# --- 5. list indexing in column paths ------------------------------------------------------------------------


def test_a_card_indexes_into_lists(tmp_path: Path) -> None:
    rows = [
        {
            "who": {"ids": ["x", "user-7"]},
            "turns": [{"text": "hello"}, {"text": "Which tent for a windy coast?"}],
            "responses": [{"text": "A low tunnel tent, guyed out."}, {"text": "Any tent will do."}],
        }
    ]
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    columns = (
        'user_id = "who.ids[1]"\nprompt = "turns[-1].text"\n'
        'chosen = "responses[0].text"\nrejected = "responses[1].text"'
    )
    card = read_card(_card(tmp_path / "card.toml", columns=columns))
    (pair,) = load_dataset(str(path), card).pairs
    assert (pair.user_id, pair.question) == ("user-7", "Which tent for a windy coast?")
    assert (pair.chosen, pair.rejected) == ("A low tunnel tent, guyed out.", "Any tent will do.")
    # An index past the end reads as a missing field, named by the card's column.
    rows[0]["responses"] = rows[0]["responses"][:1]
    write_jsonl(path, rows)
    with pytest.raises(DataError, match=r"rows.jsonl:1: field 'responses\[1\].text': missing"):
        load_dataset(str(path), card)
    # A path that is not one is the card's error, with its line.
    bad = _card(tmp_path / "bad.toml", columns='chosen = "responses[one].text"')
    with pytest.raises(ConfigError, match=r"bad.toml:10: field 'columns.chosen': 'responses\[one\].text'"):
        read_card(bad)


# --- issue 44 item 5: samples beside their card, hostile rows ------------------------------------------------


@pytest.mark.parametrize(
    ("sample", "problem"),
    [
        ("/etc", "a sample lies beside its card"),
        ("../outside", "a sample lies beside its card"),
        ("inside/../../outside", "a sample lies beside its card"),
        ("link-out", "leads outside the card's folder"),
        ("loop", "cannot be read (a symbolic link loop)"),
    ],
)
def test_a_cards_sample_stays_beside_the_card(tmp_path: Path, sample: str, problem: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    write_jsonl(outside / "secret.jsonl", [_row("u1", 1)])
    home = tmp_path / "cards"
    (home / "inside").mkdir(parents=True)
    (home / "link-out").symlink_to(outside)
    (home / "loop").symlink_to(home / "loop")
    card = _card(home / "card.toml", data=f'sample = "{sample}"')
    with pytest.raises(ConfigError) as caught:
        read_card(card)
    assert str(caught.value).startswith(f"{card}:") and problem in str(caught.value)
    assert "\n" not in str(caught.value)
    result = CliRunner().invoke(main, ["judge", "--benchmark", str(card), "--dry-run", "--no-progress"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output


def test_a_link_inside_a_sample_folder_may_not_lead_out_or_loop(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    write_jsonl(outside / "secret.jsonl", [_row("intruder", 1)])
    home = tmp_path / "cards"
    sample = home / "sample"
    sample.mkdir(parents=True)
    write_jsonl(sample / "users.jsonl", [_row("u1", 1)])
    card = read_card(_card(home / "card.toml", data='sample = "sample"'))
    assert [p.user_id for p in load_dataset(None, card).pairs] == ["u1"]
    (sample / "more").symlink_to(outside)
    with pytest.raises(ConfigError, match=r"field 'data.sample': more: leads outside the card's folder"):
        load_dataset(None, card)
    os.unlink(sample / "more")
    (sample / "again").symlink_to(sample)
    with pytest.raises(ConfigError, match=r"again: a symbolic link loop"):
        load_dataset(None, card)


def test_hostile_rows_are_one_line_naming_file_line_and_field(tmp_path: Path) -> None:
    good = json.dumps(_row("u1", 1))
    deep = (
        '{"user_id": "u2", "prompt": "q", "chosen": ' + "[" * 100_000 + "]" * 100_000 + ', "rejected": "b"}'
    )
    long_id = '{"user_id": 1' + "0" * 5000 + ', "prompt": "q", "chosen": "a", "rejected": "b"}'
    for name, line, message in (
        ("deep.jsonl", deep, ":2: field 'chosen': nested too deeply"),
        ("long.jsonl", long_id, ":2: field 'user_id': expected a string, got a 5001-digit number"),
    ):
        path = write_jsonl(tmp_path / name, [good, line])
        with pytest.raises(DataError) as caught:
            load_dataset(str(path))
        assert str(caught.value).startswith(f"{path}{message}") and "\n" not in str(caught.value)
        result = CliRunner().invoke(main, ["judge", "--dataset", str(path), "--dry-run", "--no-progress"])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output


# --- issue 44 item 10: the card's text is the data's fingerprint ---------------------------------------------


def test_editing_a_cards_tie_margin_changes_the_fingerprint(tmp_path: Path) -> None:
    """Baselines, `check`, the cache and the across-table treat two fingerprints as two datasets: a card whose
    tie margin makes other pairs must not share one with the card it was edited from."""
    data = ROOT / "prbj" / "data" / "benchmarks" / "prism"
    text = PRISM_CARD.read_text()
    five, two = tmp_path / "five.toml", tmp_path / "two.toml"
    five.write_text(text)
    two.write_text(text.replace("tie_margin = 5", "tie_margin = 2"))
    first, second = load_dataset(str(data), read_card(five)), load_dataset(str(data), read_card(two))
    assert first.fingerprint() != second.fingerprint()
    # Read again from the same text, the fingerprint is the same.
    assert load_dataset(str(data), read_card(five)).fingerprint() == first.fingerprint()
