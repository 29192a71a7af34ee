"""Issue 16, honest leaderboards and tables that fit: runs grouped by dataset, --latest, oracle rows as an
upper bound, cost at the original price, and no table cut at 80 columns or in a pipe."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from prbj.cli import main
from prbj.report.terminal import usage_table
from prbj.runs.report_command import write_reports
from run_dirs import outcomes, write_run_dir

ART = "Art_and_Entertainment"


def _report(*args: str) -> str:
    result = CliRunner().invoke(main, ["report", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_runs_on_different_datasets_get_one_leaderboard_each(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    tiny = write_run_dir(
        runs / "tiny", outcomes("j", ART, [True, True]), source="tiny.jsonl", fingerprint="f-tiny"
    )
    big = write_run_dir(runs / "big", outcomes("j", ART, [True] * 6 + [False] * 4), fingerprint="f-big")
    other = write_run_dir(runs / "big-2", outcomes("k", ART, [True] * 5 + [False] * 5), fingerprint="f-big")
    output = _report(str(tiny), str(big), str(other), "--quiet")
    assert "made on 2 different datasets" in output
    board = runs / "leaderboard"
    big_md = (board / "dataset-f-big" / "report.md").read_text()
    assert "big-2" in big_md and "tiny" not in big_md.split("## Leaderboard")[1]
    # A lone run on its own dataset is reported in its own directory, never ranked with the others.
    assert (tiny / "report.md").exists() and not (board / "dataset-f-tiny").exists()
    mixed = tmp_path / "mixed"
    _report(str(tiny), str(big), "--mix-datasets", "--out", str(mixed), "--quiet")
    ranked = [line for line in (mixed / "report.md").read_text().splitlines() if re.match(r"\| 1 \|", line)]
    assert ranked and "tiny" in ranked[0]  # what --mix-datasets asks for


def test_latest_keeps_the_newest_run_of_each_judge_and_context(tmp_path: Path) -> None:
    old = write_run_dir(tmp_path / "runs" / "run-1", outcomes("j", ART, [True] * 9 + [False]))
    new = write_run_dir(tmp_path / "runs" / "run-2", outcomes("j", ART, [True] * 5 + [False] * 5))
    out = tmp_path / "board"
    _report(str(old), str(new), "--latest", "--out", str(out), "--quiet")
    board = (out / "report.md").read_text().split("## Leaderboard")[1].split("##")[0]
    assert "50.0" in board and "90.0" not in board


def test_oracle_rows_are_an_unranked_upper_bound_and_the_run_id_comes_last(tmp_path: Path) -> None:
    fair = write_run_dir(tmp_path / "a", outcomes("j", ART, [True] * 6 + [False] * 4, context="profile"))
    oracle = write_run_dir(tmp_path / "b", outcomes("j", ART, [True] * 10, context="oracle"))
    out = tmp_path / "board"
    _report(str(fair), str(oracle), "--out", str(out), "--quiet")
    lines = (out / "report.md").read_text().splitlines()
    header = next(line for line in lines if line.startswith("| # |"))
    assert header.endswith("| run |")
    first, upper = (line for line in lines if re.match(r"\| (1|UB) \|", line))
    assert first.startswith("| 1 | j | profile |") and upper.startswith("| UB | j | oracle |")
    assert "an upper bound, not ranked" in (out / "report.md").read_text()


def test_cost_per_100_is_the_original_price_of_a_cached_replay(tmp_path: Path) -> None:
    rows = outcomes("llm", ART, [True] * 4, cost_usd=0.0, cached=True, original_cost_usd=0.01, latency_s=None)
    files = write_reports([write_run_dir(tmp_path / "run", rows)])
    text = files.markdown.read_text()
    leader = next(line for line in text.splitlines() if line.startswith("| 1 |"))
    assert leader.endswith("| $1.00 |")  # 100 × $0.01, although the replay cost nothing


def test_demo_note_names_only_the_runs_that_used_the_sample(tmp_path: Path) -> None:
    demo = write_run_dir(tmp_path / "demo", outcomes("j", ART, [True]), source="sample", fingerprint="f")
    real = write_run_dir(tmp_path / "real", outcomes("k", ART, [True]), fingerprint="f")
    files = write_reports([demo, real], tmp_path / "board")
    assert "1 of these 2 runs (demo) used the bundled demo sample" in files.markdown.read_text()
    files = write_reports([real], tmp_path / "board-real")
    assert "demo sample" not in files.markdown.read_text()


def test_demo_note_of_a_card_sample_names_that_benchmarks_full_data(tmp_path: Path) -> None:
    """A run on a card's sample is told where that benchmark's data is, not Personalized RewardBench's."""
    prism = write_run_dir(
        tmp_path / "prism", outcomes("j", ART, [True]), source="sample", fingerprint="p", benchmark="prism"
    )
    text = write_reports([prism], tmp_path / "board").markdown.read_text()
    assert "This run used a bundled demo sample" in text
    assert "prism: hf:HannahRoseKirk/prism-alignment" in text and "QiyaoMa" not in text


def test_80_column_tables_keep_every_column_and_whole_names(tmp_path: Path) -> None:
    usage = [
        {
            "provider": "gemini-3-flash", "requests_sent": 60, "retries": 2, "cache_hits": 3, "errors": 1,
            "skipped_budget": 0, "skipped_cache": 0, "prompt_tokens": 43143, "completion_tokens": 122880,
            "cost_usd": 0.3902, "saved_usd": 0.0123,
        }
    ]  # fmt: skip
    console = Console(width=80, record=True, force_terminal=False)
    console.print(usage_table(usage))
    text = console.export_text()
    assert "gemini-3-flash" in text
    words = set(text.split())
    for column in (
        "sent",
        "retry",
        "cached",
        "failed",
        "not sent",
        "tok in",
        "tok out",
        "$ spent",
        "$ saved",
    ):
        assert set(column.split()) <= words, (column, text)
    for value in ("60", "2", "3", "1", "0", "43,143", "122,880", "0.3902", "0.0123"):
        assert value in words, (value, text)
    assert all(len(line) <= 80 for line in text.splitlines())
    wide = Console(width=160, record=True)
    wide.print(usage_table(usage))
    wide_text = wide.export_text()
    assert "$ saved" in wide_text and "gemini-3-flash" in wide_text


def test_judge_and_report_at_80_columns_in_a_pipe_drop_nothing(tmp_path: Path) -> None:
    names = ["a-rather-long-judge-name-for-a-model", "another-judge-with-a-long-name"]
    rows = [r for name in names for r in outcomes(name, ART, [True, False, True], context="profile")]
    run = write_run_dir(tmp_path / "run", rows)
    result = CliRunner(env={"COLUMNS": "80"}).invoke(main, ["report", str(run)], terminal_width=80)
    assert result.exit_code == 0, result.output
    for name in names:
        assert name in result.output  # never wrapped mid-word
    for column in ("overall % (95% CI)", "ties %", "LC acc %", "failed", "$ / 100"):
        assert column in result.output, column


def test_html_report_links_each_judge_to_its_wrong_pairs(tmp_path: Path) -> None:
    rows = outcomes("j", ART, [True, False, True, False])
    files = write_reports([write_run_dir(tmp_path / "run", rows)])
    html = files.html.read_text()
    link = re.search(r'<a href="#(wrong-[^"]+)">j</a>', html)
    assert link is not None
    listed = re.search(rf'<details id="{link.group(1)}">(.*?)</details>', html, re.S)
    assert listed is not None and "p-001, p-003" in listed.group(1) and "2 wrong, 0 failed" in listed.group(1)


def test_downstream_show_filters_and_pivots_by_k(tmp_path: Path) -> None:
    records = tmp_path / "outcomes.csv"
    lines = ["rm,source,subset,k,score"] + [
        f"{rm},bon,{subset},{k},{score}"
        for rm, base in (("rm-a", 0.5), ("rm-b", 0.6))
        for subset in ("all", ART)
        for k, score in ((1, base), (4, base + 0.1), (16, base + 0.2))
    ]
    records.write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    assert CliRunner().invoke(main, ["downstream", "add", str(records), "--store", str(store)]).exit_code == 0
    shown = CliRunner().invoke(
        main, ["downstream", "show", "--store", str(store), "--rm", "rm-a", "--subset", "all", "--k", "4"]
    )
    assert shown.exit_code == 0, shown.output
    assert "(1 rows)" in shown.output and "rm-b" not in shown.output
    pivot = CliRunner().invoke(
        main, ["downstream", "show", "--store", str(store), "--subset", "all", "--pivot"]
    )
    assert pivot.exit_code == 0, pivot.output
    assert "k=1" in pivot.output and "k=4" in pivot.output and "k=16" in pivot.output
    assert re.search(r"rm-b\s.*bon\s.*all\s.*0\.6.*0\.7.*0\.8", pivot.output)
    typo = CliRunner().invoke(main, ["downstream", "show", "--store", str(store), "--rm", "rm-c"])
    assert typo.exit_code == 2 and "did you mean" in typo.output
