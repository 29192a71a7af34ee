"""`prbj build annotate` (blind sheets) and `prbj build agreement` (means and Cohen's κ, hand-computed here)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import SUBSET_NAMES, make_record, write_jsonl
from prbj.cli import main

DIMENSIONS = ("factuality", "relevance", "helpfulness", "adherence")
JUDGE_CHOSEN = {"factuality": 5, "relevance": 5, "helpfulness": 4, "adherence": 5}
JUDGE_REJECTED = {"factuality": 5, "relevance": 5, "helpfulness": 4, "adherence": 1}


@pytest.fixture
def build_dir(tmp_path: Path) -> Path:
    return make_build_dir(tmp_path)


def make_build_dir(tmp_path: Path) -> Path:
    """A build directory as `prbj build` leaves it: five kept pairs and their provenance."""
    out = tmp_path / "build"
    out.mkdir()
    pairs = [make_record(i, SUBSET_NAMES[i % 3]) for i in range(1, 6)]
    write_jsonl(out / "pairs.jsonl", pairs)
    provenance = [
        {
            "id": pair["id"],
            "plan": {"source": "planner", "aspects": ["keeps costs low", "hands-on"]},
            "checks": {"chosen": JUDGE_CHOSEN, "rejected": JUDGE_REJECTED},
        }
        for pair in pairs
    ]
    write_jsonl(out / "provenance.jsonl", provenance)
    return out


def invoke(*args: str):
    return CliRunner().invoke(main, ["build", *args], catch_exceptions=False)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def annotate(build_dir: Path, *extra: str) -> Path:
    result = invoke("annotate", str(build_dir), "--annotators", "2", "--sample", "4", *extra)
    assert result.exit_code == 0, result.output
    return build_dir / "annotation"


def fill(sheet: Path, key: list[dict[str, str]], ratings: dict[int, tuple[dict, dict, str]]) -> Path:
    """Write an annotator's ratings, given per item in chosen/rejected terms, into the blind A/B columns."""
    rows = read_csv(sheet)
    for row in rows:
        (entry,) = [k for k in key if k["sheet"] == row["sheet"] and k["item"] == row["item"]]
        chosen, rejected, preference = ratings[int(row["item"])]
        a, b = (chosen, rejected) if entry["answer_a"] == "chosen" else (rejected, chosen)
        for d in DIMENSIONS:
            row[f"a_{d}"], row[f"b_{d}"] = str(a[d]), str(b[d])
        if preference == "tie":
            row["preference"] = "tie"
        else:
            row["preference"] = "A" if (preference == "chosen") == (entry["answer_a"] == "chosen") else "B"
    with sheet.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return sheet


def scores(**values: int) -> dict[str, int]:
    return {"factuality": 5, "relevance": 5, "helpfulness": 4, **values}


def test_sheets_are_blind_shared_and_reproducible(build_dir: Path) -> None:
    folder = annotate(build_dir)
    sheets = [folder / "sheet-1.csv", folder / "sheet-2.csv"]
    key = read_csv(folder / "key.csv")
    assert len(key) == 8
    pairs = {
        json.loads(line)["id"]: json.loads(line)
        for line in (build_dir / "pairs.jsonl").read_text().splitlines()
    }
    orders = []
    for sheet in sheets:
        text = sheet.read_text(encoding="utf-8-sig")
        assert "chosen" not in text.lower() and "rejected" not in text.lower()
        assert "SECRET" not in text  # the gold narrative and rubric stay out of the sheet
        rows = read_csv(sheet)
        assert [r["item"] for r in rows] == ["1", "2", "3", "4"]
        assert all(r[f"a_{d}"] == "" and r["preference"] == "" for r in rows for d in DIMENSIONS)
        for row in rows:
            (entry,) = [k for k in key if k["sheet"] == row["sheet"] and k["item"] == row["item"]]
            pair = pairs[entry["pair_id"]]
            expected_a = pair["chosen"] if entry["answer_a"] == "chosen" else pair["rejected"]
            assert row["answer_a"] == expected_a and row["question"] == pair["question"]
            assert row["aspects"] == "• keeps costs low\n• hands-on"
            orders.append(entry["answer_a"])
    # Every annotator rates the same pairs, each with its own random order of answers.
    assert [k["pair_id"] for k in key[:4]] == [k["pair_id"] for k in key[4:]]
    assert set(orders) == {"chosen", "rejected"}
    first = [s.read_bytes() for s in sheets]
    annotate(build_dir)
    assert [s.read_bytes() for s in sheets] == first
    annotate(build_dir, "--seed", "7")
    assert [s.read_bytes() for s in sheets] != first


def test_agreement_reports_means_and_hand_computed_kappas(build_dir: Path) -> None:
    folder = annotate(build_dir)
    key = read_csv(folder / "key.csv")
    first = {
        1: (scores(adherence=5, relevance=5), scores(adherence=1, relevance=3), "chosen"),
        2: (scores(adherence=5, relevance=4), scores(adherence=1, relevance=4), "chosen"),
        3: (scores(adherence=4, relevance=5), scores(adherence=2, relevance=3), "rejected"),
        4: (scores(adherence=4, relevance=4), scores(adherence=2, relevance=4), "tie"),
    }
    second = {
        1: (scores(adherence=5, relevance=5, helpfulness=5), scores(adherence=1, relevance=3), "chosen"),
        2: (scores(adherence=5, relevance=4), scores(adherence=1, relevance=4), "rejected"),
        3: (scores(adherence=4, relevance=5), scores(adherence=2, relevance=3), "rejected"),
        4: (scores(adherence=4, relevance=4), scores(adherence=3, relevance=4), "tie"),
    }
    sheets = [fill(folder / "sheet-1.csv", key, first), fill(folder / "sheet-2.csv", key, second)]
    result = invoke("agreement", str(build_dir), *map(str, sheets))
    assert result.exit_code == 0, result.output
    report = json.loads((folder / "agreement.json").read_text())
    humans = report["means"]["annotators"]
    assert humans["chosen"]["adherence"] == 4.5
    assert humans["rejected"]["adherence"] == pytest.approx(13 / 8)
    assert humans["preference"]["chosen"] == pytest.approx(3 / 8)
    assert report["means"]["check model"]["rejected"]["adherence"] == 1.0

    (between,) = report["kappa"]["between_annotators"]
    assert between["n_pairs"] == 4
    # Adherence, 8 ratings each; one disagreement (2 vs 3) → Σw·O = (1/16)/8. With X, Y the two raters'
    # marginals, Σw·E = E[(X−Y)²]/16 = (Var X + Var Y + (EX − EY)²)/16 = (2.5 + 2.359375 + 0.015625)/16.
    # κ = 1 − 0.125/4.875 = 38/39.
    assert between["adherence"] == pytest.approx(38 / 39, abs=1e-4)
    assert between["relevance"] == 1.0  # identical, non-constant ratings
    assert between["factuality"] is None  # both always 5: chance agreement is perfect, κ undefined
    # Helpfulness: rater 1 always 4, rater 2 once 5 → observed disagreement equals chance: κ = 0.
    assert between["helpfulness"] == 0.0
    # Preference C C R T vs C R R T: p_o = 3/4, p_e = ½·¼ + ¼·½ + ¼·¼ = 5/16, κ = (3/4 − 5/16)/(11/16) = 7/11.
    assert between["preference"] == pytest.approx(7 / 11, abs=1e-4)

    with_judge = {row["a"]: row for row in report["kappa"]["annotator_vs_check_model"]}
    # Rater 1 adherence 5 1 5 1 4 2 4 2 against the check model's 5 1 5 1 5 1 5 1: Σw·O = (2 + 2)/16/8,
    # Σw·E = (2.5 + 4 + 0)/16, κ = 1 − 0.5/6.5 = 12/13.
    assert with_judge["sheet-1"]["adherence"] == pytest.approx(12 / 13, abs=1e-4)
    # The check model always prefers the chosen answer on kept pairs: κ = 0 by construction.
    assert with_judge["sheet-1"]["preference"] == 0.0
    markdown = (folder / "agreement.md").read_text()
    assert "| sheet-1 vs sheet-2 | 4 |" in markdown
    assert "Cohen's κ" in result.output


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda rows: rows[1].update(a_adherence="4.5"),
            "row 3: field 'a_adherence': expected an integer from 1 to 5, got '4.5'",
        ),
        (
            lambda rows: rows[0].update(b_relevance=""),
            "row 2: field 'b_relevance': expected an integer from 1 to 5, got nothing",
        ),
        (
            lambda rows: rows[3].update(preference="both"),
            "row 5: field 'preference': expected A, B or tie, got 'both'",
        ),
        (lambda rows: rows[2].update(item="99"), "row 4: field 'item': sheet-1 item '99' is not in the key"),
        (lambda rows: rows.pop(), "row 5: field 'item': item 4 is missing (3 of 4 rows)"),
    ],
)
def test_a_bad_sheet_is_one_line_naming_file_row_and_field(build_dir: Path, edit, message: str) -> None:
    folder = annotate(build_dir)
    key = read_csv(folder / "key.csv")
    sheet = fill(
        folder / "sheet-1.csv",
        key,
        {i: (scores(adherence=5), scores(adherence=1), "chosen") for i in range(1, 5)},
    )
    rows = read_csv(sheet)
    edit(rows)
    with sheet.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = invoke("agreement", str(build_dir), str(sheet))
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [f"error: {sheet}: {message}"]


def test_the_same_sheet_twice_and_a_missing_column_are_errors(build_dir: Path, tmp_path: Path) -> None:
    folder = annotate(build_dir)
    key = read_csv(folder / "key.csv")
    sheet = fill(
        folder / "sheet-1.csv",
        key,
        {i: (scores(adherence=5), scores(adherence=1), "chosen") for i in range(1, 5)},
    )
    copy = tmp_path / "copy.csv"
    copy.write_bytes(sheet.read_bytes())
    result = invoke("agreement", str(build_dir), str(sheet), str(copy))
    assert (
        result.exit_code == 2
        and f"{copy}: row 2: field 'sheet': sheet-1 was already read from {sheet}" in result.output
    )
    rows = read_csv(sheet)
    with sheet.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=[c for c in rows[0] if c != "b_adherence"], extrasaction="ignore"
        )
        writer.writeheader()
        writer.writerows(rows)
    result = invoke("agreement", str(build_dir), str(sheet))
    assert result.exit_code == 2 and "row 1: field 'b_adherence': missing column" in result.output
    result = invoke("agreement", str(tmp_path), str(sheet))
    assert result.exit_code == 2 and "no key file" in result.output
