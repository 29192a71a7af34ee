"""`prbj report` over runs on several benchmarks: one table of judge × benchmark with user accuracy and its
interval, and each judge's mean rank, checked against ranks worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from user_rows import USER_ACCURACY, per_user_rows

from prbj.analysis.across import across_benchmarks
from prbj.cli import main
from prbj.runs import rundir
from run_dirs import outcomes, write_run_dir


def _runs(root: Path) -> list[Path]:
    # PRB-shaped: one pair per user. a 8/10, b 6/10, c 6/10 (tied with b), oracle 10/10.
    prb = [
        *outcomes("a", "S", [True] * 8 + [False] * 2),
        *outcomes("b", "S", [True] * 6 + [False] * 4),
        *outcomes("c", "S", [True] * 6 + [False] * 4),
        *outcomes("a", "S", [True] * 10, context="oracle"),
    ]
    # Per-user: a at the hand-computed user accuracy; b right on every decided pair but u2's tie, which stays a
    # tie (decided, never correct): (1 + 1/2 + 1) / 3.
    per_user = per_user_rows("a", "none") + [
        row | {"correct": row["status"] == "ok" and not row["tie"]} for row in per_user_rows("b", "none")
    ]
    return [
        write_run_dir(root / "prb-run", prb, benchmark="prb", fingerprint="prb-fp-1"),
        write_run_dir(
            root / "synth-run", per_user, benchmark="personal-reward-bench", fingerprint="prbench-fp"
        ),
        # A PRB run that records no benchmark (made before benchmarks were recorded) joins PRB's column.
        write_run_dir(
            root / "prb-unnamed",
            outcomes("d", "S", [True] * 5 + [False] * 5),
            fingerprint="prb-fp-1",
            started="2000-01-01T00:00:00",
        ),
        # An older run of a on the per-user benchmark: the later one counts.
        write_run_dir(
            root / "synth-old",
            [row | {"correct": False} for row in per_user_rows("a", "none")],
            benchmark="personal-reward-bench",
            fingerprint="prbench-fp",
            started="2000-01-01T00:00:00",
        ),
    ]


def test_mean_rank_and_user_accuracy_per_benchmark_by_hand(tmp_path: Path) -> None:
    table = across_benchmarks([rundir.load_run(path) for path in _runs(tmp_path)])
    assert [c.label for c in table.columns] == ["prb v1", "personal-reward-bench v1"]
    rows = {(r.judge, r.context): r for r in table.rows}
    prb, per_user = (c.key for c in table.columns)
    # PRB: a first; b and c tie for places 2 and 3, so each gets 2.5; d last; the oracle row is never ranked.
    assert [rows[(j, "none")].cells[prb].rank for j in "abcd"] == [1.0, 2.5, 2.5, 4.0]
    assert rows[("a", "oracle")].cells[prb].rank is None and rows[("a", "oracle")].mean_rank is None
    # Per-user benchmark: b (5/6) above a (the hand-computed 7/18, from a's latest run).
    assert rows[("a", "none")].cells[per_user].accuracy == USER_ACCURACY
    assert rows[("a", "none")].cells[per_user].per_user
    assert rows[("b", "none")].cells[per_user].accuracy == 5 / 6
    assert (rows[("a", "none")].mean_rank, rows[("b", "none")].mean_rank) == (1.5, 1.75)
    assert rows[("c", "none")].mean_rank == 2.5 and rows[("c", "none")].ranked_on == 1
    # Ranked on both first, by mean rank; then c; the oracle row last.
    assert [(r.judge, r.context) for r in table.rows] == [
        ("a", "none"),
        ("b", "none"),
        ("c", "none"),
        ("d", "none"),
        ("a", "oracle"),
    ]
    # PRB cells are pair accuracy with the pair interval: no user figures there.
    assert rows[("a", "none")].cells[prb].accuracy == 0.8 and not rows[("a", "none")].cells[prb].per_user


def test_report_over_several_benchmarks_writes_one_table(tmp_path: Path) -> None:
    paths = _runs(tmp_path / "runs")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["report", *map(str, paths), "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "judges across benchmarks" in text and "mean rank" in text
    markdown = (out / "benchmarks.md").read_text()
    assert "| 1 | a | none | 80.0 (" in markdown and f"{100 * USER_ACCURACY:.1f} (" in markdown
    assert "| UB | a | oracle |" in markdown
    document = json.loads((out / "benchmarks.json").read_text())
    assert [b["name"] for b in document["benchmarks"]] == ["prb", "personal-reward-bench"]
    assert document["rows"][0]["mean_rank"] == 1.5
    html = (out / "benchmarks.html").read_text()
    assert '<table id="table-benchmarks">' in html


def test_runs_on_one_benchmark_write_no_cross_table(tmp_path: Path) -> None:
    prb_run = _runs(tmp_path / "runs")[0]
    result = CliRunner().invoke(main, ["report", str(prb_run), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "out" / "benchmarks.md").exists()


def test_one_report_over_several_benchmarks_holds_the_table_as_a_section(tmp_path: Path) -> None:
    paths = _runs(tmp_path / "runs")[:2]
    out = tmp_path / "out"
    args = ["report", *map(str, paths), "--mix-datasets", "--out", str(out), "--quiet"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    section = report.split("## Judges across benchmarks", 1)[1].split("\n## ", 1)[0]
    assert "| 1 | a | none | 80.0 (" in section and "personal-reward-bench v1 %" in section
    assert 'id="table-benchmarks"' in (out / "report.html").read_text()
