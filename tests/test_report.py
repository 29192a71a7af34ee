from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner, Result
from scipy import stats

from prbj.cli import main
from prbj.runs.report_command import write_reports
from run_dirs import judgment, outcomes, write_run_dir

ROOT = Path(__file__).resolve().parents[1]
ART = "Art_and_Entertainment"
SOCIETY = "Society_and_Culture"


class _Elements(HTMLParser):
    """Every start tag with its attributes, and whether tags were balanced."""

    VOID: ClassVar[set[str]] = {"meta", "br", "img", "input", "link", "hr"}

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1] if self.open else None}>"
        self.open.pop()


def _parse(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    parser.close()
    assert parser.open == [], f"unclosed tags: {parser.open}"
    return parser


def _assert_self_contained(html: str) -> _Elements:
    parsed = _parse(html)
    for tag, attrs in parsed.tags:
        for name in ("src", "href", "xlink:href", "action", "data"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), f"<{tag} {name}={value!r}> points outside the file"
        assert tag not in {"script", "link", "iframe", "img", "object", "embed"}, f"<{tag}> in the report"
    assert not re.search(r"https?://", html), "a URL in a self-contained report"
    assert "@import" not in html and "url(" not in html
    return parsed


def _figure_ids(parsed: _Elements) -> set[str]:
    return {attrs["id"] or "" for tag, attrs in parsed.tags if tag == "figure"}


def _only_run_dir(out: Path) -> Path:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False, terminal_width=200)


def test_prbj_judge_writes_markdown_and_html_reports(small_dataset: Path, tmp_path: Path) -> None:
    result = _invoke("judge", "--no-progress", "--dataset", str(small_dataset), "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    run_dir = _only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    markdown = (run_dir / "report.md").read_text()
    overall = {r["judge"]: r for r in summary["results"] if r["subset"] == "all"}
    for judge, row in overall.items():
        line = next(
            line for line in markdown.splitlines() if line.startswith("| ") and f"| {judge} |" in line
        )
        assert f"{100 * row['accuracy']:.1f} ({100 * row['ci_low']:.1f}–{100 * row['ci_high']:.1f})" in line
    # Ranked by overall accuracy: the leaderboard's first data row is the best judge.
    best = max(overall.values(), key=lambda r: r["accuracy"])["judge"]
    first_row = next(line for line in markdown.splitlines() if line.startswith("| 1 |"))
    assert f"| {best} |" in first_row
    for heading in ("## Leaderboard", "## Position bias", "## Length control", "## Cost", "## Downstream"):
        assert heading in markdown
    assert "n/a" in markdown  # the offline judges record no cost
    for link in re.findall(r"\]\((plots/[^)]+)\)", markdown):
        assert (run_dir / link).read_text().startswith("<?xml")
    parsed = _assert_self_contained((run_dir / "report.html").read_text())
    assert sum(1 for tag, _ in parsed.tags if tag == "svg") >= 3
    assert {"figure-accuracy", "figure-length-control"} <= _figure_ids(parsed)
    # Offline judges cost nothing: a sentence says so instead of a chart of empty bars marked "$0" (issue 26).
    assert "figure-cost" not in _figure_ids(parsed) and "Every judge here was free" in markdown
    # One accuracy dot per judge and panel (overall + three subsets) in the accuracy chart.
    assert "report.html" in result.output


def test_accuracy_chart_draws_a_dot_and_interval_per_judge_and_subset(tmp_path: Path) -> None:
    rows = [
        *outcomes("good", ART, [True] * 9 + [False], prefix="a"),
        *outcomes("good", SOCIETY, [True] * 6 + [False] * 4, prefix="s"),
        *outcomes("bad", ART, [False] * 8 + [True] * 2, prefix="a"),
        *outcomes("bad", SOCIETY, [False] * 10, prefix="s"),
    ]
    files = write_reports([write_run_dir(tmp_path / "run", rows)])
    svg = (files.html.parent / "plots" / "accuracy.svg").read_text()
    dots = [unescape(t) for t in re.findall(r"<circle[^>]*><title>([^<]*)</title>", svg)]
    assert len(dots) == 2 * 3  # two judges × (overall, Art, Society)
    assert any(t.startswith("good · none — Art & Entertainment: 90.0%") for t in dots)
    assert any(t.startswith("bad · none — Society & Culture: 0.0%") for t in dots)


def test_position_bias_section_from_pairwise_judgments(tmp_path: Path) -> None:
    # Right whenever the chosen answer is shown first, wrong whenever it is second: a pure "always A" judge.
    rows = [
        judgment(f"p-{i:02d}", ART, "always-a", position=pos, correct=pos == "A")
        for i, pos in enumerate(["A", "B"] * 10)
    ]
    rows += [judgment(f"p-{i:02d}", ART, "fair", position=pos) for i, pos in enumerate(["A", "B"] * 10)]
    run = write_run_dir(tmp_path / "run", rows)
    files = write_reports([run])
    markdown = files.markdown.read_text()
    line = next(line for line in markdown.splitlines() if line.startswith("| always-a |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells == ["always-a", "none", "100.0", "10", "0.0", "10", "+100.0", "100.0"]
    fair = [c.strip() for c in next(x for x in markdown.splitlines() if x.startswith("| fair |")).split("|")]
    assert fair[3] == fair[5] == "100.0" and fair[8] == "50.0"
    parsed = _assert_self_contained(files.html.read_text())
    assert "figure-position-bias" in _figure_ids(parsed)


def test_without_pairwise_data_position_bias_says_so_and_draws_nothing(tmp_path: Path) -> None:
    files = write_reports([write_run_dir(tmp_path / "run", outcomes("j", ART, [True, False, True]))])
    markdown = files.markdown.read_text()
    section = markdown.split("## Position bias")[1].split("##")[0]
    assert "No pairwise judgments" in section and "|" not in section
    assert "figure-position-bias" not in _figure_ids(_parse(files.html.read_text()))


def test_cost_per_100_judgments_uses_cost_usd_when_present(tmp_path: Path) -> None:
    rows = [
        {**r, "cost_usd": 0.002, "cached": i % 2 == 0}
        for i, r in enumerate(outcomes("paid", ART, [True] * 40))
    ]
    rows += outcomes("free", ART, [True] * 40)
    files = write_reports([write_run_dir(tmp_path / "run", rows)])
    markdown = files.markdown.read_text()
    cost_section = markdown.split("## Cost")[1].split("##")[0]
    paid = [
        c.strip() for c in next(x for x in cost_section.splitlines() if x.startswith("| paid |")).split("|")
    ]
    # 40 judgments at $0.002: $0.08 in total, $0.20 per 100; half served from the cache.
    assert paid[3:7] == ["40", "$0.08", "$0.20", "50.0"]
    free = next(x for x in cost_section.splitlines() if x.startswith("| free |"))
    assert "n/a" in free
    svg = (files.html.parent / "plots" / "cost.svg").read_text()
    assert "$0.20" in svg and "n/a" in svg


def test_downstream_curves_scatter_and_correlations(tmp_path: Path) -> None:
    accuracies = {"rm-a": 0.9, "rm-b": 0.7, "rm-c": 0.6, "rm-d": 0.4}
    rows = []
    for rm, accuracy in accuracies.items():
        hits = round(accuracy * 20)
        rows += outcomes(rm, ART, [i < hits for i in range(20)], prefix="a")
    run = write_run_dir(tmp_path / "run", rows)
    final = {"rm-a": 0.61, "rm-b": 0.52, "rm-c": 0.57, "rm-d": 0.40}
    downstream = [
        (rm, ART, k, 0.4 + (final[rm] - 0.4) * step / 3)
        for rm in final
        for step, k in enumerate((1, 2, 4, 8))
    ]
    pl.DataFrame(downstream, schema=["rm", "subset", "k", "score"], orient="row").write_parquet(
        run / "downstream.parquet"
    )
    files = write_reports([run])
    markdown = files.markdown.read_text()
    x = [accuracies[rm] for rm in final]
    y = [final[rm] for rm in final]
    # A downstream table without a source column is BoN, as `prbj downstream` reads it.
    row = next(line for line in markdown.splitlines() if line.startswith("| bon |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "4"
    assert float(cells[2]) == pytest.approx(stats.spearmanr(x, y).statistic, abs=5e-4)
    assert float(cells[3]) == pytest.approx(stats.kendalltau(x, y).statistic, abs=5e-4)
    assert float(cells[4]) == pytest.approx(stats.pearsonr(x, y).statistic, abs=5e-4)
    parsed = _assert_self_contained(files.html.read_text())
    assert {"figure-best-of-k-bon", "figure-benchmark-vs-bon"} <= _figure_ids(parsed)
    curves = (files.html.parent / "plots" / "best-of-k-bon.svg").read_text()
    assert curves.count("<polyline") == 4


def test_downstream_file_with_missing_columns_is_a_data_error(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path / "run", outcomes("j", ART, [True, False, True]))
    pl.DataFrame({"rm": ["j"], "subset": [ART], "k": [1]}).write_parquet(run / "downstream.parquet")
    result = CliRunner().invoke(main, ["report", str(run)])
    assert result.exit_code == 2
    assert "downstream.parquet" in result.output and "score" in result.output


def test_downstream_store_matches_judges_by_name_and_context(tmp_path: Path) -> None:
    """A `prbj downstream` store given with --downstream: rows name judges as `judge` or `judge@context`,
    PPO rows (no k) join the scatter but draw no curve."""
    rows = []
    for judge, context, hits in (
        ("a", "profile", 18),
        ("a", "none", 12),
        ("b", "none", 14),
        ("c", "none", 9),
    ):
        rows += outcomes(judge, ART, [i < hits for i in range(20)], prefix="a", context=context)
    run = write_run_dir(tmp_path / "run", rows)
    store = tmp_path / "store"
    store.mkdir()
    records = [
        # Plain "a" is the context a ran in first (profile); a@none names the other one.
        {"rm": "a", "source": "ppo", "subset": "all", "score": 0.9},
        {"rm": "a@none", "source": "ppo", "subset": "all", "score": 0.5},
        {"rm": "b", "source": "ppo", "subset": "all", "score": 0.7},
        {"rm": "c", "source": "ppo", "subset": "all", "score": 0.2},
        {"rm": "unknown-rm", "source": "ppo", "subset": "all", "score": 0.1},
    ]
    (store / "ppo.json").write_text(json.dumps(records))
    result = _invoke("report", str(run), "--downstream", str(store / "ppo.json"), "--quiet")
    assert result.exit_code == 0, result.output
    markdown = (run / "report.md").read_text()
    cells = [c.strip() for c in next(x for x in markdown.splitlines() if x.startswith("| ppo |")).split("|")]
    assert cells[2] == "4"  # the unknown RM has no benchmark accuracy
    accuracy = {"a · profile": 0.9, "a · none": 0.6, "b · none": 0.7, "c · none": 0.45}
    downstream = {"a · profile": 0.9, "a · none": 0.5, "b · none": 0.7, "c · none": 0.2}
    x = [accuracy[k] for k in accuracy]
    y = [downstream[k] for k in accuracy]
    assert float(cells[3]) == pytest.approx(stats.spearmanr(x, y).statistic, abs=5e-4)
    assert float(cells[5]) == pytest.approx(stats.pearsonr(x, y).statistic, abs=5e-4)
    svg = (run / "plots" / "benchmark-vs-ppo.svg").read_text()
    assert unescape(svg).count("a · none: accuracy 60.0%, downstream 0.5") == 1
    assert not (run / "plots" / "best-of-k-ppo.svg").exists()


def test_several_runs_make_one_leaderboard(tmp_path: Path) -> None:
    first = write_run_dir(tmp_path / "runs" / "run-1", outcomes("j", ART, [True] * 8 + [False] * 2))
    second = write_run_dir(tmp_path / "runs" / "run-2", outcomes("j", ART, [True] * 5 + [False] * 5))
    (tmp_path / "runs" / "baselines").mkdir()
    result = CliRunner().invoke(
        main, ["report", str(first), str(second), str(tmp_path / "runs" / "baselines")]
    )
    assert result.exit_code == 0, result.output
    assert "skipped" in result.output and "baselines" in result.output
    markdown = (tmp_path / "runs" / "leaderboard" / "report.md").read_text()
    # Issue 16: the run id is not a ranking column; it comes last, after the figures.
    header = next(line for line in markdown.splitlines() if line.startswith("| # | judge | context |"))
    assert header.startswith("| # | judge | context | overall % (95% CI) |") and header.endswith("| run |")
    ranked = [line for line in markdown.splitlines() if re.match(r"\| [12] \|", line)]
    assert "run-1" in ranked[0] and "80.0" in ranked[0]
    assert "run-2" in ranked[1] and "50.0" in ranked[1]
    _assert_self_contained((tmp_path / "runs" / "leaderboard" / "report.html").read_text())


def test_report_cli_prints_the_tables_and_honours_out(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path / "run", outcomes("judge-x", ART, [True, True, False]))
    result = _invoke("report", str(run), "--out", str(tmp_path / "elsewhere"), "--title", "My RMs")
    assert result.exit_code == 0
    assert "Leaderboard" in result.output and "judge-x" in result.output and "66.7" in result.output
    assert (tmp_path / "elsewhere" / "report.md").read_text().startswith("# My RMs\n")
    assert not (run / "report.md").exists()
    quiet = _invoke("report", str(run), "--quiet")
    assert "Leaderboard" not in quiet.output and (run / "report.html").exists()


def test_missing_run_directory_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "nope" in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(main, ["report", str(empty)])
    assert result.exit_code == 2 and "summary.json" in result.output


def test_names_are_escaped_in_markdown_and_html(tmp_path: Path) -> None:
    rows = outcomes("<script>x|y</script>", ART, [True, False])
    files = write_reports([write_run_dir(tmp_path / "run", rows)])
    assert "x\\|y" in files.markdown.read_text()
    html = files.html.read_text()
    assert "<script>" not in html and "&lt;script&gt;x|y" in html
    _assert_self_contained(html)


def test_demo_sample_warning_in_reports(tmp_path: Path) -> None:
    files = write_reports([write_run_dir(tmp_path / "run", outcomes("j", ART, [True]), source="sample")])
    assert "demo sample" in files.markdown.read_text()
    assert "demo sample" in files.html.read_text()


def _pixels_near(png: Path, rgb: tuple[int, int, int], tolerance: int = 12) -> int:
    image = pytest.importorskip("PIL.Image").open(png).convert("RGB")
    distance = np.abs(np.asarray(image, dtype=np.int16) - np.array(rgb, dtype=np.int16)).max(axis=2)
    return int((distance <= tolerance).sum())


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="no Chromium on this machine: apt-get install chromium"
)
def test_headless_chromium_renders_the_charts(tmp_path: Path) -> None:
    pytest.importorskip("PIL.Image")
    rows = [
        judgment(
            f"p-{i:02d}", ART, f"judge-{j}", position="AB"[i % 2], correct=(i + j) % 3 != 0, cost_usd=0.01
        )
        for j in range(3)
        for i in range(30)
    ]
    files = write_reports([write_run_dir(tmp_path / "run", rows)])
    # The same page without its charts: whatever palette colour the report shows beyond this, the SVG drew.
    without_charts = tmp_path / "no-charts.html"
    without_charts.write_text(re.sub(r"<svg.*?</svg>", "", files.html.read_text(), flags=re.S))
    script = ROOT / "scripts" / "screenshot_report.sh"
    blue = (0x00, 0x72, 0xB2)
    counts = {}
    for name, page in (("report", files.html), ("no-charts", without_charts)):
        png = tmp_path / f"{name}.png"
        subprocess.run(["bash", str(script), str(page), str(png), "1280x2400"], check=True, timeout=120)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        counts[name] = _pixels_near(png, blue)
    assert counts["no-charts"] < 50
    # Dots, interval bars, legend squares and cost bars: thousands of pixels of the first palette colour.
    assert counts["report"] > 2000


def test_report_of_a_real_pairwise_run_shows_an_always_a_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: `prbj judge` with a generative judge whose server always answers "A"."""
    from loopback import ProviderServer

    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "test-key")
    with ProviderServer(reply=lambda request: "Result: A") as server:
        result = _invoke(
            "judge",
            "--no-progress",
            "-p",
            "openai-compatible",
            "--api-base",
            server.url,
            "--limit",
            "4",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--out",
            str(tmp_path / "out"),
        )
    assert result.exit_code == 0, result.output
    run_dir = _only_run_dir(tmp_path / "out")
    markdown = (run_dir / "report.md").read_text()
    section = markdown.split("## Position bias")[1].split("## Length")[0]
    row = next(line for line in section.splitlines() if line.startswith("| openai-compatible |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # Right exactly when the chosen answer was shown as A; every verdict is "A".
    assert (cells[2], cells[4], cells[6], cells[7]) == ("100.0", "0.0", "+100.0", "100.0")
    assert int(cells[3]) + int(cells[5]) == 12
    parsed = _assert_self_contained((run_dir / "report.html").read_text())
    assert "figure-position-bias" in _figure_ids(parsed)


def test_beyond_accuracy_sections_reliance_comparisons_consistency_and_slices(tmp_path: Path) -> None:
    """Figures beyond accuracy render in report.md and report.html, with the comparison matrix and a chart per
    slice; each is computed from the judgments the run holds."""
    rows = []
    for i in range(40):
        pair, subset = f"p-{i:02d}", ART if i % 2 else SOCIETY
        rows.append(judgment(pair, subset, "llm", context="profile", correct=i < 32, profile_posts=i % 8))
        rows.append(
            judgment(pair, subset, "llm", context="swapped-profile", correct=i < 12, profile_posts=i % 8)
        )
        rows.append(
            judgment(
                pair,
                subset,
                "llm",
                context="none",
                correct=i < 20,
                profile_posts=i % 8,
                sample_verdicts="chosen|chosen|rejected" if i < 10 else "rejected|rejected|rejected",
            )
        )
    files = write_reports([write_run_dir(tmp_path / "run", rows)], slices=("profile-posts", "subset"))
    markdown = files.markdown.read_text()
    for heading in (
        "## Profile reliance",
        "## Judges compared",
        "## Self-consistency",
        "## Accuracy by slice",
    ):
        assert heading in markdown
    # Reliance: 80% with the real profile, 30% swapped, 50% without: a 50-point drop.
    assert "| llm | 40 | 80.0 | 30.0 | 50.0 | +50.0 |" in markdown
    # Self-consistency: 10 pairs split 2-1 (majority right), 30 unanimous and wrong.
    assert "| llm | none | 3 | 40 | 75.0 | 25.0 |" in markdown
    parsed = _assert_self_contained(files.html.read_text())
    figures = _figure_ids(parsed)
    assert {"figure-comparison-matrix", "figure-slice-profile-posts", "figure-slice-subset"} <= figures
    matrix = (files.html.parent / "plots" / "comparison-matrix.svg").read_text()
    cells = [unescape(t) for t in re.findall(r"<rect[^>]*><title>([^<]*)</title>", matrix)]
    assert len(cells) == 6  # three entries, each against the two others
    assert any(t.startswith("llm · profile vs llm · swapped-profile: +50.0 pp") for t in cells)
    slice_svg = (files.html.parent / "plots" / "slice-subset.svg").read_text()
    assert len(re.findall(r"<circle", slice_svg)) == 3 * 2  # three entries × two subsets
    assert "MDE" in markdown
