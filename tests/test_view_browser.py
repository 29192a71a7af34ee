"""The viewer in a real browser (headless Debian Chromium through Playwright): every page opens, every filter
of the form gives what Polars gives on judgments.parquet, j/k step through pairs, a label saved in the page is
in labels.jsonl and on the page after a reload, the scoring standard stays behind its toggle, a text holding a
<script> never runs, and the static bundle opens from disk."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from browser import chromium_or_skip, serving
from view_runs import llm_run, sample_run

from prbj.runs import rundir
from prbj.view.bundle import write_bundle
from prbj.view.catalog import Catalog

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser(runs: dict[str, Path]) -> Iterator[Any]:
    # After `runs`: Playwright's sync API keeps an event loop on this thread, and `prbj judge` starts its own.
    with chromium_or_skip() as running:
        yield running


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("browser")
    sample = sample_run(base / "reports")
    other = Path(shutil.copytree(sample, base / "reports" / "changed"))
    frame = pl.read_parquet(other / "judgments.parquet")
    flip = pl.col("judge") == "random"
    frame.with_columns(
        pl.when(flip).then(~pl.col("correct")).otherwise(pl.col("correct")).alias("correct")
    ).write_parquet(other / "judgments.parquet")
    return {"sample": sample, "other": other, "llm": llm_run(base)}


@pytest.fixture(scope="module")
def site(runs: dict[str, Path]) -> Iterator[str]:
    with serving([runs["sample"], runs["other"], runs["llm"]]) as (url, _):
        yield url


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert not errors, errors


def _count(page: Any) -> int:
    return int(page.inner_text("#count"))


def test_runs_run_and_compare_pages_open(page, site, runs) -> None:
    page.goto(site + "/")
    assert page.locator("h2", has_text="Dataset sample").count() == 1
    page.check(f'input[value="{runs["sample"].name}"]')
    page.check('input[value="changed"]')
    page.click("text=Compare the runs ticked")
    assert page.locator("h1").inner_text().startswith("Compared")
    page.goto(site + "/")
    page.click(f"table.runs >> text={runs['sample'].name}")
    assert page.locator("figure svg").count() >= 3
    page.click("#leaderboard table >> text=length")
    assert _count(page) == 60


FORM_FILTERS: list[tuple[str, Any, Any]] = [
    (
        "judge",
        lambda p: p.select_option('select[name="judge"]', ["length", "random"]),
        lambda f: f.filter(pl.col("judge").is_in(["length", "random"])),
    ),
    (
        "context",
        lambda p: p.select_option('select[name="context"]', "profile"),
        lambda f: f.filter(pl.col("context") == "profile"),
    ),
    (
        "subset",
        lambda p: p.select_option('select[name="subset"]', "Art_and_Entertainment"),
        lambda f: f.filter(pl.col("subset") == "Art_and_Entertainment"),
    ),
    (
        "status",
        lambda p: p.select_option('select[name="status"]', "ok"),
        lambda f: f.filter(pl.col("status") == "ok"),
    ),
    (
        "outcome",
        lambda p: p.select_option('select[name="outcome"]', "wrong"),
        lambda f: f.filter((pl.col("status") == "ok") & ~pl.col("correct")),
    ),
    ("disagree", lambda p: p.check('input[name="disagree"]'), None),
    (
        "changed",
        lambda p: p.select_option('select[name="changed"]', "changed"),
        lambda f: f.filter(pl.col("judge") == "random"),
    ),
    ("search", lambda p: p.fill('input[name="q"]', "sourdough"), None),
]


@pytest.mark.parametrize("name,use,expected", FORM_FILTERS, ids=[f[0] for f in FORM_FILTERS])
def test_each_filter_in_the_form_matches_polars(page, site, runs, name, use, expected) -> None:
    frame = pl.read_parquet(runs["sample"] / "judgments.parquet")
    if name == "disagree":
        ok = frame.filter(pl.col("status") == "ok")
        split = ok.group_by("pair_id").agg(pl.col("correct").n_unique().alias("n")).filter(pl.col("n") > 1)
        want = frame.filter(pl.col("pair_id").is_in(split["pair_id"].implode())).height
    elif name == "search":
        pairs = {p: t for p, t in _texts(runs["sample"]).items() if "sourdough" in t}
        want = frame.filter(pl.col("pair_id").is_in(list(pairs))).height
    else:
        want = expected(frame).height
    page.goto(f"{site}/run/{runs['sample'].name}/judgments")
    use(page)
    page.click("#apply")
    page.wait_for_load_state()
    assert _count(page) == want
    assert page.locator("table.judgments tbody tr").count() == min(want, 50)


def _texts(run: Path) -> dict[str, str]:
    from prbj.runs.run_pairs import read_run_pairs

    loaded = rundir.load_run_header(run)
    pairs = read_run_pairs(loaded.dataset, loaded.run.get("config")).pairs
    return {
        p.id: "\n".join([p.question, *(x.text for x in p.profile), p.chosen, p.rejected]).lower()
        for p in pairs.values()
    }


def test_inconsistent_filter_and_sorting_in_the_form(page, site, runs) -> None:
    frame = pl.read_parquet(runs["llm"] / "judgments.parquet")
    page.goto(f"{site}/run/{runs['llm'].name}/judgments")
    page.check('input[name="inconsistent"]')
    page.click("#apply")
    assert _count(page) == frame.filter(pl.col("verdict") == "inconsistent").height
    page.goto(f"{site}/run/{runs['llm'].name}/judgments")
    page.select_option('select[name="sort"]', "judge")
    page.check('input[name="desc"]')
    page.click("#apply")
    assert page.locator("table.judgments tbody tr td:nth-child(3)").first.inner_text() == "judge-y"


def test_keyboard_steps_through_the_pairs_of_the_selection(page, site, runs) -> None:
    frame = pl.read_parquet(runs["sample"] / "judgments.parquet")
    wrong = frame.filter((pl.col("judge") == "length") & (pl.col("status") == "ok") & ~pl.col("correct"))
    ids = wrong.sort("pair_id")["pair_id"].to_list()
    page.goto(f"{site}/run/{runs['sample'].name}/judgments?judge=length&outcome=wrong")
    page.keyboard.press("j")
    page.keyboard.press("j")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator("h1").inner_text().startswith(f"Pair {ids[1]}")
    assert page.inner_text("#place") == f"2 of {len(ids)}"
    for key, expected in (("j", ids[2]), ("k", ids[1]), ("k", ids[0])):
        with page.expect_navigation():
            page.keyboard.press(key)
        assert page.locator("h1").inner_text().startswith(f"Pair {expected}")
    assert "judge=length" in page.url and "outcome=wrong" in page.url


def test_a_label_saved_in_the_page_is_in_labels_jsonl_after_a_reload(page, site, runs) -> None:
    page.goto(f"{site}/run/{runs['llm'].name}/pair/t-003?blind=1")
    assert page.locator(".badge").count() == 0 and page.locator(".judge").count() == 0
    page.check('input[name="preference"][value="B"]')
    page.fill('input[name="note"]', "B speaks to <film> users")
    page.click("#save-label")
    assert page.locator("#saved").is_visible()
    page.reload()
    assert "alice" in page.inner_text("#labels")
    (label,) = [lb for lb in rundir.read_labels(runs["llm"]) if lb.pair_id == "t-003"]
    assert label.reviewer == "alice" and label.note == "B speaks to <film> users" and label.slot == "B"


def test_beyond_loopback_the_token_url_opens_a_session_whose_links_and_labels_work(browser, runs) -> None:
    """Served beyond loopback every page needs the token: the printed URL's ?token= becomes a cookie, after
    which links, the filter form and the label form work as they do on loopback."""
    run = runs["llm"]
    with serving([run]) as (url, viewer):
        viewer.token_to_read = True
        context = browser.new_context()
        page = context.new_page()
        try:
            refused = page.goto(f"{url}/run/{run.name}/pair/t-004")
            assert refused is not None and refused.status == 403 and "token" in page.inner_text("main")
            page.goto(f"{url}/?token={viewer.token}")
            assert "token=" not in page.url
            page.click(f"table.runs >> text={run.name}")
            page.click("#all-judgments")
            assert _count(page) == 12
            page.click("a.open >> nth=6")
            assert page.locator("h1").inner_text().startswith("Pair t-004")
            page.check('input[name="preference"][value="A"]')
            page.click("#save-label")
            assert page.locator("#saved").is_visible()
        finally:
            context.close()
    assert any(label.pair_id == "t-004" for label in rundir.read_labels(run))


def test_the_scoring_standard_stays_behind_its_toggle(page, site, runs) -> None:
    url = f"{site}/run/{runs['llm'].name}/pair/t-002"
    page.goto(url)
    assert not page.locator("#narrative").is_visible()
    page.click("#standard summary")
    # <details> fires its toggle event as a queued task: the URL changes after the click returns.
    page.wait_for_url(lambda url: "standard=1" in url, timeout=5_000)
    assert page.locator("#narrative").is_visible()
    page.reload()
    assert page.locator("#narrative").is_visible()


def test_a_script_in_a_profile_or_answer_never_runs(page, site, runs) -> None:
    page.goto(f"{site}/run/{runs['llm'].name}/pair/t-001")
    assert page.evaluate("window.pwned") is None
    assert "<script>window.pwned = 1</script>" in page.inner_text("#answer-A") + page.inner_text("#answer-B")


def test_the_static_bundle_opens_from_disk(page, runs, tmp_path) -> None:
    out = tmp_path / "bundle"
    write_bundle(Catalog.open([runs["sample"], runs["llm"]]), out)
    page.goto((out / "index.html").as_uri())
    page.click(f"table.runs >> text={runs['llm'].name}")
    assert page.locator("#leaderboard").count() == 1
    page.click("#all-judgments")
    assert _count(page) == 12
    # The page's own script runs from disk under the bundle's <meta> Content-Security-Policy.
    page.keyboard.press("j")
    assert page.locator("table.judgments tr.current").count() == 1
    page.click("text=judge-y · none >> xpath=.. >> text=failed")
    assert _count(page) == 1
    page.click("a.open")
    assert page.locator("h1").inner_text().startswith("Pair t-006")
    assert page.evaluate("window.pwned") is None
