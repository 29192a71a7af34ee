"""Issue 45 item 8: a user's own pairs in Personalized RewardBench's layout need no scoring standard. `narrative`
and `rubric_aspects` are only shown in the oracle context, so pairs may leave them out (or null), in every file
format; the oracle context is then refused in one line. A bad record has every one of its problems named."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from conftest import make_record, write_jsonl
from prbj.cli import main
from prbj.data import load_dataset
from prbj.errors import DataError


def _bare(index: int, **overrides: object) -> dict[str, object]:
    record = make_record(index, **overrides)
    del record["narrative"], record["rubric_aspects"]
    return record


@pytest.mark.parametrize("suffix", ["jsonl", "parquet", "json"])
def test_pairs_without_a_scoring_standard_are_read_in_every_format(tmp_path: Path, suffix: str) -> None:
    records = [_bare(1), _bare(2), make_record(3, narrative=None, rubric_aspects=None), make_record(4)]
    path = tmp_path / f"mine.{suffix}"
    if suffix == "jsonl":
        write_jsonl(path, records)
    elif suffix == "parquet":
        pl.DataFrame(records[:2]).write_parquet(path)  # a table whose columns leave both out
    else:
        import json

        path.write_text(json.dumps(records))
    data = load_dataset(str(path))
    assert [p.id for p in data.pairs] == [r["id"] for r in (records[:2] if suffix == "parquet" else records)]
    assert all(p.narrative == "" and p.rubric_aspects == () for p in data.pairs[:2])


def test_a_run_on_them_works_and_the_oracle_context_is_refused_in_one_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mine.jsonl", [_bare(i) for i in range(1, 5)])
    runner = CliRunner(env={"COLUMNS": "400"})
    out = ["--no-progress", "--out", str(tmp_path / "out")]
    result = runner.invoke(main, ["judge", "--dataset", str(path), "-p", "length", *out])
    assert result.exit_code == 0, result.output
    oracle = ["judge", "--dataset", str(path), "-p", "gemini-3-flash", "--context", "oracle", "--dry-run"]
    result = runner.invoke(main, [*oracle, "--personal-data", "any", *out])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0] == (
        f"error: --context oracle: {path} has no scoring standard (narrative, rubric_aspects) to show; "
        "use profile, planner or none"
    )


def test_the_oracle_context_names_the_pairs_that_lack_one(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mine.jsonl", [make_record(1), _bare(2), make_record(3), _bare(4)])
    result = CliRunner(env={"COLUMNS": "400"}).invoke(
        main,
        ["judge", "--dataset", str(path), "-p", "gemini-3-flash", "--context", "oracle", "--dry-run",
         "--personal-data", "any", "--out", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "to show for 2 of its 4 pairs (first: pair 't-002')" in result.output


def test_every_problem_of_the_first_bad_record_is_named(tmp_path: Path) -> None:
    bad = make_record(2, chosen="", rubric_aspects=[{"evidence": "x"}])
    del bad["question"]
    bad["profile"][0] = {"id": "p", "category": "c"}
    path = write_jsonl(
        tmp_path / "p.jsonl", [make_record(1), bad, make_record(3, rejected=""), _bare(4, id=None)]
    )
    with pytest.raises(DataError) as info:
        load_dataset(str(path))
    assert str(info.value) == (
        f"{path}:2: field 'question': missing; field 'profile[0]': field 'text': missing; "
        "field 'rubric_aspects[0]': field 'aspect': missing; field 'chosen': is empty "
        "(and 2 more records with problems)"
    )
