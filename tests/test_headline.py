"""One headline per benchmark (issue 43, item 5): the figure a card's [protocol] names (user accuracy where it
says nothing) ranks and bolds the terminal leaderboard, report.md and report.html, is what `prbj check` gates on,
ranks the table across benchmarks, and leads the exports. Each run here is built so that pair accuracy and user
accuracy rank the judges in opposite orders, and every figure is worked out by hand in the docstring."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import polars as pl
from click.testing import CliRunner, Result

from prbj.analysis.across import across_benchmarks
from prbj.analysis.stats import summarize
from prbj.cli import main
from prbj.report.terminal import leaderboard
from prbj.runs import rundir
from prbj.runs.execute import JUDGMENT_SCHEMA
from run_dirs import judgment, write_run_dir

# Two judges on 6 users: u1 wrote 10 pairs, u2-u6 one each.
# - "pairsy" is right on u1's 10 pairs and wrong on the 5 others: pairs 10/15 = 66.7%, users 1/6 = 16.7%;
# - "usery" is wrong on u1's 10 and right on the 5 others: pairs 5/15 = 33.3%, users 5/6 = 83.3%.
USERS = ["u1"] * 10 + ["u2", "u3", "u4", "u5", "u6"]


def rows_of(judge: str, right: list[bool], users: list[str] = USERS) -> list[dict]:
    return [
        judgment(f"p{i:02d}", "S", judge, correct=ok, user_id=user)
        for i, (ok, user) in enumerate(zip(right, users, strict=True))
    ]


def two_judges() -> list[dict]:
    return [*rows_of("pairsy", [True] * 10 + [False] * 5), *rows_of("usery", [False] * 10 + [True] * 5)]


def invoke(*args: str | Path) -> Result:
    return CliRunner(env={"COLUMNS": "400"}).invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_the_terminal_leaderboard_ranks_and_bolds_user_accuracy_where_users_repeat() -> None:
    frame = pl.DataFrame(two_judges(), schema={**JUDGMENT_SCHEMA, "user_id": pl.String})
    table = leaderboard(summarize(frame, seed=0))
    judges = [str(cell).split("[/bold]")[0].removeprefix("[bold]") for cell in table.columns[0].cells]
    assert judges == ["usery", "pairsy"]
    styles = {str(column.header): str(column.style) for column in table.columns if column.header != "95% CI"}
    assert styles["users"] == "bold" and styles["acc"] != "bold"


def test_report_md_and_html_rank_by_the_headline_and_bold_its_column(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path / "run", two_judges())
    result = invoke("report", run, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "out" / "report.md").read_text()
    board = [line for line in markdown.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert board[0].startswith("| 1 | usery |") and board[1].startswith("| 2 | pairsy |")
    # Users 83.3% in bold; pair accuracy 33.3% not.
    assert "| **83.3 (" in board[0] and "| 33.3 (" in board[0]
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<strong>83.3 (" in html and "<strong>33.3 (" not in html


def test_a_card_whose_headline_is_pairs_ranks_by_pairs(tmp_path: Path) -> None:
    from prbj.analysis.headline import Headline
    from prbj.data.card_protocol import ScoringProtocol

    run = write_run_dir(tmp_path / "run", two_judges(), headline=Headline(ScoringProtocol(unit="pairs")))
    result = invoke("report", run, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| 1 | pairsy | none | **66.7 (" in markdown


def test_the_viewers_runs_page_ranks_by_the_headline_and_keeps_official_runs_apart(tmp_path: Path) -> None:
    """The viewer's Runs page ranked by pair accuracy under an 'acc %' header: it ranks by the headline (user
    accuracy here: usery above pairsy) and names it; a run under --protocol official is a leaderboard of its own
    on the same dataset, as in `prbj report`."""
    import asyncio
    import re

    from aiohttp.test_utils import TestClient, TestServer

    from prbj.analysis.headline import Headline
    from prbj.data.card_protocol import ScoringProtocol
    from prbj.view.catalog import Catalog
    from prbj.view.server import Viewer, make_app

    plain = write_run_dir(tmp_path / "plain", two_judges(), fingerprint="fp")
    rules = ScoringProtocol(unit="pairs", failures="wrong", source="the authors' code")
    official = write_run_dir(
        tmp_path / "official", two_judges(), fingerprint="fp", headline=Headline(rules, "official")
    )

    async def page() -> str:
        client = TestClient(TestServer(make_app(Viewer(Catalog.open([plain, official]), "alice"))))
        await client.start_server()
        try:
            return await (await client.get("/")).text()
        finally:
            await client.close()

    html = asyncio.run(page())
    sections = html.split('<section class="dataset">')[1:]
    assert len(sections) == 2
    ranked = {
        re.search(r'<th class="num">(\w+) %</th>', section).group(1): re.findall(r"judge=(\w+)&amp;", section)
        for section in sections
    }
    assert ranked == {"users": ["usery", "pairsy"], "official": ["pairsy", "usery"]}


def test_report_ranks_official_runs_apart_from_prbjs_on_the_same_data(tmp_path: Path) -> None:
    """Two runs on one dataset, one under --protocol official: two leaderboards (the official figure counts
    failures wrong and has the authors' interval; ranked in one column with prbj's figures it put one judge
    twice in one order by two rules)."""
    from prbj.analysis.headline import Headline
    from prbj.data.card_protocol import ScoringProtocol

    plain = write_run_dir(tmp_path / "plain", two_judges(), fingerprint="fp")
    rules = ScoringProtocol(unit="pairs", failures="wrong", source="the authors' code")
    official = write_run_dir(
        tmp_path / "official", two_judges(), fingerprint="fp", headline=Headline(rules, "official")
    )
    result = invoke("report", plain, official, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "runs under --protocol official have a leaderboard of their own" in " ".join(result.output.split())
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == [
        "dataset-fp",
        "dataset-fp-official",
    ]
    official_board = (tmp_path / "out" / "dataset-fp-official" / "report.md").read_text()
    assert "| 1 | pairsy | none | **66.7 (" in official_board and "usery" in official_board
    assert "| 1 | usery |" in (tmp_path / "out" / "dataset-fp" / "report.md").read_text()


def regression_runs(root: Path) -> tuple[Path, Path]:
    """12 users: B1, B2 wrote 10 pairs each, S1-S10 one each; one judge.
    Baseline: S right, B wrong → pairs 10/30, users 10/12. Run: S wrong, B1 and B2 five right each → pairs 10/30
    again, users (1/2 + 1/2) / 12 = 1/12: user accuracy fell 75 points with pair accuracy unchanged.
    Per-user changes: -1 for each S, +1/2 for each B, sum -9. Sign flips: |Σ ± d| ≥ 9 when the ten S keep their
    signs (2/1024 of the sign vectors, whatever the B do), or one S flips (20/1024) and the B both side with the
    rest (1/4): p = (2 + 5) / 1024 ≈ 0.0068 < 0.05."""
    users = [u for u in ("B1", "B2") for _ in range(10)] + [f"S{i}" for i in range(1, 11)]
    before = [False] * 20 + [True] * 10
    after = ([True] * 5 + [False] * 5) * 2 + [False] * 10
    base = write_run_dir(root / "base", rows_of("rm", before, users), fingerprint="fp")
    run = write_run_dir(root / "run", rows_of("rm", after, users), fingerprint="fp")
    return base, run


def test_check_fails_a_user_accuracy_regression_where_pair_accuracy_holds(tmp_path: Path) -> None:
    base, run = regression_runs(tmp_path)
    baseline = tmp_path / "base.json"
    assert invoke("check", base, "--baseline", baseline, "--update-baseline").exit_code == 0
    result = invoke("check", run, "--baseline", baseline, "--format", "json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    (overall,) = [g for g in report["groups"] if g["subset"] == "all"]
    assert overall["figure"] == "users" and overall["status"] == "fail"
    assert (overall["baseline_accuracy"], overall["accuracy"]) == (10 / 12, 1 / 12)
    assert overall["p_value"] == 7 / 1024


def test_checks_table_says_which_figure_it_gated_and_what_decided(tmp_path: Path) -> None:
    """The table's caption names the figure gated and the test: user accuracy and the sign-flip test over users
    here (it said 'items' and 'McNemar p' whatever was gated); McNemar over items on PRB's independent pairs."""
    base, run = regression_runs(tmp_path)
    baseline = tmp_path / "base.json"
    assert invoke("check", base, "--baseline", baseline, "--update-baseline").exit_code == 0
    output = " ".join(invoke("check", run, "--baseline", baseline).output.split())
    assert "−/+: users lost/gained" in output and "Fail = user accuracy dropped beyond 2 pts" in output
    assert "the sign-flip test over users" in output and "McNemar" not in output
    flat = [judgment(f"p{i}", "S", "rm", correct=i % 2 == 0) for i in range(8)]
    one_each = write_run_dir(tmp_path / "flat", flat, fingerprint="flat")
    assert invoke("check", one_each, "--baseline", tmp_path / "flat.json", "--update-baseline").exit_code == 0
    output = " ".join(invoke("check", one_each, "--baseline", tmp_path / "flat.json").output.split())
    assert (
        "−/+: items lost/gained" in output
        and "Fail = accuracy dropped beyond 2 pts AND p < 0.05 (McNemar)" in output
    )


def test_check_of_a_card_whose_headline_is_pairs_passes_the_same_runs(tmp_path: Path) -> None:
    from prbj.analysis.headline import Headline
    from prbj.data.card_protocol import ScoringProtocol

    pairs = Headline(ScoringProtocol(unit="pairs"))
    users = [u for u in ("B1", "B2") for _ in range(10)] + [f"S{i}" for i in range(1, 11)]
    before = [False] * 20 + [True] * 10
    after = ([True] * 5 + [False] * 5) * 2 + [False] * 10
    base = write_run_dir(tmp_path / "base", rows_of("rm", before, users), fingerprint="fp", headline=pairs)
    run = write_run_dir(tmp_path / "run", rows_of("rm", after, users), fingerprint="fp", headline=pairs)
    baseline = tmp_path / "base.json"
    assert invoke("check", base, "--baseline", baseline, "--update-baseline").exit_code == 0
    assert invoke("check", run, "--baseline", baseline).exit_code == 0


def test_the_table_across_benchmarks_ranks_each_benchmark_by_its_own_headline(tmp_path: Path) -> None:
    """A benchmark whose card names pairs ranks pairsy first there (66.7% against 33.3%); one without a card
    protocol ranks by users, usery first (83.3% against 16.7%)."""
    from prbj.analysis.headline import Headline
    from prbj.data.card_protocol import ScoringProtocol

    by_pairs = write_run_dir(
        tmp_path / "a",
        two_judges(),
        benchmark="pairs-bench",
        fingerprint="fa",
        headline=Headline(ScoringProtocol(unit="pairs")),
    )
    by_users = write_run_dir(tmp_path / "b", two_judges(), benchmark="users-bench", fingerprint="fb")
    table = across_benchmarks([rundir.load_run(by_pairs), rundir.load_run(by_users)])
    ranks = {(row.judge, key.split("@")[0]): cell for row in table.rows for key, cell in row.cells.items()}
    assert ranks[("pairsy", "pairs-bench")].rank == 1 and ranks[("pairsy", "pairs-bench")].accuracy == 10 / 15
    assert ranks[("usery", "users-bench")].rank == 1 and ranks[("usery", "users-bench")].accuracy == 5 / 6


def test_exports_lead_with_the_headline(tmp_path: Path) -> None:
    """PRISM's card names users: EEE's first result and Inspect's first metric are user accuracy; the
    PersonalRewardBench card's unit is judgments: its first EEE result is that figure (prbj.headline)."""
    for benchmark in ("prism", "personal-reward-bench"):
        out = tmp_path / benchmark
        judged = invoke("judge", "--benchmark", benchmark, "-p", "length", "--out", out, "--no-progress")
        assert judged.exit_code == 0, judged.output
        (run,) = [p for p in out.iterdir() if p.is_dir()]
        summary = json.loads((run / "summary.json").read_text())
        overall = next(r for r in summary["results"] if r["subset"] == "all")
        assert invoke("export", run, "--format", "eee", "--out", tmp_path / f"eee-{benchmark}").exit_code == 0
        (aggregate,) = [
            p
            for p in (tmp_path / f"eee-{benchmark}").rglob("*.json")
            if not p.name.endswith("_samples.jsonl")
        ]
        first = json.loads(aggregate.read_text())["evaluation_results"][0]
        assert first["metric_config"]["additional_details"]["prbj.headline"] == "true"
        if benchmark == "prism":
            assert first["metric_config"]["metric_id"] == "prbj.user_accuracy"
            assert first["score_details"]["score"] == overall["user_accuracy"]
            assert invoke("export", run, "--format", "inspect", "--out", tmp_path / "inspect").exit_code == 0
            (log,) = (tmp_path / "inspect").glob("*.eval")
            with zipfile.ZipFile(log) as archive:
                header = json.loads(archive.read("header.json"))
            metrics = header["results"]["scores"][0]["metrics"]
            assert next(iter(metrics)) == "user_accuracy"
            assert metrics["user_accuracy"]["value"] == overall["user_accuracy"]
        else:
            assert first["metric_config"]["metric_id"] == "prbj.headline"
            assert first["score_details"]["score"] == overall["headline"]
