"""The report's charts in a real Chromium (issue 26): at 1400 and 800 pixels no label is clipped by its chart or
runs into another, whatever the number and length of the judges' names; bins read "−11 to −3"; a free judge
gets no empty bar; a judge with no judgment says why. Screenshots of both widths are taken (and kept in the
test's folder) as part of the test."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from browser import chromium_or_skip

from prbj.runs.report_command import write_reports
from run_dirs import judgment, write_run_dir

pytestmark = pytest.mark.browser

SUBSETS = ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture")
JUDGES = (
    ("litellm:openai/Qwen/Qwen3-8B-Instruct-2507-AWQ", "profile", 0.012),
    ("hf:/models/Skywork-Reward-V2-Llama-3.1-8B", "profile", 0.0),  # a local model: free
    ("a-judge-with-a-really-long-name-that-goes-on-and-on-forever-and-ever", "none", 0.004),
    ("gemini-3-flash", "planner", 0.002),
    ("bm25-profile", "profile", 0.0),
    ("embed-profile", "profile", 0.0),
    ("claude-sonnet-4-5", "swapped-profile", 0.03),
    ("gpt-5.1", "none", 0.02),
)
FAILED_JUDGE = ("gpt-5.1-mini-that-failed", "none")

# Every text of every chart: its box against its chart's, and against every other text of the chart.
CHECK_LABELS = """() => {
  const problems = [];
  for (const svg of document.querySelectorAll('figure svg')) {
    const name = svg.closest('figure').id;
    const box = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')]
      .filter(t => t.textContent.trim())
      .map(t => ({text: t.textContent, r: t.getBoundingClientRect()}));
    for (const {text, r} of texts) {
      if (text.includes('…')) problems.push(`${name}: cut: ${text}`);
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
        problems.push(`${name}: clipped: ${text}`);
    }
    for (let i = 0; i < texts.length; i++)
      for (let j = i + 1; j < texts.length; j++) {
        const a = texts[i].r, b = texts[j].r;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 0.5 && h > 0.5) problems.push(`${name}: overlap: ${texts[i].text} | ${texts[j].text}`);
      }
  }
  return problems;
}"""


def _rows() -> list[dict[str, Any]]:
    rows = []
    for j, (name, context, cost) in enumerate(JUDGES):
        for i in range(36):
            subset = SUBSETS[i % 3]
            # Answers of very different lengths, the chosen one often shorter: negative length-diff bins.
            chosen, rejected = 10 + (i * 7) % 40, 30 + (i * 11) % 25
            rows.append(
                judgment(
                    f"p-{i:02d}",
                    subset,
                    name,
                    context=context,
                    correct=(i * (j + 3)) % 5 != 0,
                    position="AB"[i % 2],
                    chosen_words=chosen,
                    rejected_words=rejected,
                    cost_usd=cost,
                    latency_s=0.5 + 0.01 * i,
                    profile_posts=i % 9,
                )
            )
    for i in range(6):
        rows.append(
            judgment(
                f"p-{i:02d}",
                SUBSETS[i % 3],
                FAILED_JUDGE[0],
                context=FAILED_JUDGE[1],
                status="api_error",
                position="AB"[i % 2],
                error="could not connect: ConnectionRefusedError",
                cost_usd=0.0,
                latency_s=0.0,
                profile_posts=i % 9,
            )
        )
    return rows


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_run_dir(tmp_path_factory.mktemp("charts") / "run", _rows())
    downstream = [
        (name, subset, k, 0.3 + 0.05 * j + 0.02 * k)
        for j, (name, _, _) in enumerate(JUDGES)
        for subset in ("all", *SUBSETS)
        for k in (1, 2, 4, 8)
    ]
    pl.DataFrame(downstream, schema=["rm", "subset", "k", "score"], orient="row").write_parquet(
        run / "downstream.parquet"
    )
    return write_reports([run], slices=("length-diff", "profile-posts")).html


@pytest.fixture(scope="module")
def browser(report: Path) -> Iterator[Any]:
    with chromium_or_skip() as running:
        yield running


@pytest.mark.parametrize("width", [1400, 800])
def test_no_chart_label_is_clipped_or_overlaps_another(browser, report: Path, width: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": 1000})
    try:
        page.goto(report.as_uri())
        figures = page.locator("figure svg").count()
        assert figures >= 8
        problems = page.evaluate(CHECK_LABELS)
        shot = report.parent / f"report-{width}.png"
        page.screenshot(path=str(shot), full_page=True)
    finally:
        page.close()
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    assert not problems, "\n".join(problems)


def test_bins_costs_and_missing_judgments_read_clearly(report: Path) -> None:
    html = report.read_text()
    # A negative bin reads "−25 to −11", not "-25--11".
    assert re.search(r"—? ?−\d+ to −?\d+", html), "no negative length-diff bin"
    assert not re.search(r"-\d+[-–]-\d+", html)
    # A judge that cost nothing gets a word, not an empty bar marked "$0".
    assert "free" in html
    # The pairwise judge whose every call failed is named, with why, where position bias is shown.
    assert f"{FAILED_JUDGE[0]} · none: no answered judgment (6/6 failed" in html
