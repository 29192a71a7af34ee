"""`prbj view` served in process (aiohttp's test client over a real socket): every filter against Polars on
judgments.parquet, the pair page, labels (token, labels.jsonl, agreement), the path and host guards, escaped
texts, bad run directories, annotation sheets, the static bundle and the wheel's assets."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import json
import re
import shutil
import socket
import subprocess
import sys
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import polars as pl
import pytest
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner
from view_runs import SCRIPT, llm_run, sample_run

from prbj.cli import main
from prbj.data.annotation import RATING_COLUMNS
from prbj.runs import rundir
from prbj.view.catalog import Catalog
from prbj.view.server import Viewer, make_app

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("view")
    sample = sample_run(base / "reports")
    llm = llm_run(base)
    broken = base / "broken-run"
    broken.mkdir()
    (broken / "summary.json").write_text("{not json", encoding="utf-8")
    return {"sample": sample, "llm": llm, "broken": broken}


@pytest.fixture
def copies(runs: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """Fresh copies for tests that write labels."""
    out = {}
    for name in ("sample", "llm"):
        out[name] = Path(shutil.copytree(runs[name], tmp_path / runs[name].name))
    shutil.copy(runs["llm"].parent / "pairs.jsonl", tmp_path / "pairs.jsonl")
    return out


async def _client(paths: list[Path], **viewer: object) -> TestClient:
    catalog = Catalog.open(paths)
    client = TestClient(TestServer(make_app(Viewer(catalog, "alice", **viewer))))  # type: ignore[arg-type]
    await client.start_server()
    return client


@pytest.fixture
async def client(runs: dict[str, Path]) -> AsyncIterator[TestClient]:
    client = await _client([runs["sample"], runs["llm"], runs["broken"]])
    yield client
    await client.close()


def _key(path: Path) -> str:
    return path.name


async def _keys_of(client: TestClient, url: str) -> set[tuple[str, str, str]]:
    response = await client.get(url)
    assert response.status == 200, await response.text()
    lines = (await response.text()).splitlines()
    return {(r["pair_id"], r["judge"], r["context"]) for r in map(json.loads, lines)}


def _keys(frame: pl.DataFrame) -> set[tuple[str, str, str]]:
    return set(frame.select("pair_id", "judge", "context").iter_rows())


def _disagree(frame: pl.DataFrame) -> pl.DataFrame:
    ok = frame.filter(pl.col("status") == "ok")
    split = ok.group_by("pair_id").agg(pl.col("correct").n_unique().alias("n")).filter(pl.col("n") > 1)
    return frame.filter(pl.col("pair_id").is_in(split["pair_id"].implode()))


SAMPLE_FILTERS = {
    "judge=length&context=none": lambda f: f.filter(
        (pl.col("judge") == "length") & (pl.col("context") == "none")
    ),
    "judge=random&judge=length": lambda f: f.filter(pl.col("judge").is_in(["random", "length"])),
    "context=profile": lambda f: f.filter(pl.col("context") == "profile"),
    "subset=Society_and_Culture": lambda f: f.filter(pl.col("subset") == "Society_and_Culture"),
    "status=ok": lambda f: f.filter(pl.col("status") == "ok"),
    "outcome=correct": lambda f: f.filter((pl.col("status") == "ok") & pl.col("correct")),
    "outcome=wrong": lambda f: f.filter((pl.col("status") == "ok") & ~pl.col("correct")),
    "outcome=wrong&judge=bm25-profile": lambda f: f.filter(
        (pl.col("status") == "ok") & ~pl.col("correct") & (pl.col("judge") == "bm25-profile")
    ),
    "disagree=1": _disagree,
    "disagree=1&judge=length&judge=random&outcome=wrong": lambda f: _disagree(
        f.filter(pl.col("judge").is_in(["length", "random"]))
    ).filter(~pl.col("correct")),
}


@pytest.mark.parametrize("query", list(SAMPLE_FILTERS))
async def test_every_filter_equals_polars_on_judgments_parquet(client, runs, query) -> None:
    frame = pl.read_parquet(runs["sample"] / "judgments.parquet")
    expected = _keys(SAMPLE_FILTERS[query](frame))
    assert expected, f"{query}: the sample gives this filter nothing to find"
    assert await _keys_of(client, f"/run/{_key(runs['sample'])}/export.jsonl?{query}") == expected


async def test_llm_filters_inconsistent_failed_and_text(client, runs) -> None:
    frame = pl.read_parquet(runs["llm"] / "judgments.parquet")
    assert (
        frame.filter(pl.col("status") != "ok").height == 1
    )  # an api_error, which no outcome filter but failed takes
    key = _key(runs["llm"])
    cases = {
        "inconsistent=1": frame.filter(pl.col("verdict") == "inconsistent"),
        "outcome=failed": frame.filter(pl.col("status") != "ok"),
        # A failed judgment has no outcome: never counted wrong (the run holds one, correct = false).
        "outcome=wrong": frame.filter((pl.col("status") == "ok") & ~pl.col("correct")),
        "outcome=wrong&judge=judge-y": frame.filter(
            (pl.col("status") == "ok") & ~pl.col("correct") & (pl.col("judge") == "judge-y")
        ),
        "outcome=abstained": frame.head(0),
        "status=api_error": frame.filter(pl.col("status") == "api_error"),
        # The text search reads the dataset: only pair t-001's answer holds an <img> tag.
        "q=ONERROR": frame.filter(pl.col("pair_id") == "t-001"),
        "q=sourdough": frame,
        "q=no+such+words": frame.head(0),
    }
    for query, expected in cases.items():
        assert await _keys_of(client, f"/run/{key}/export.jsonl?{query}") == _keys(expected), query


async def test_changed_against_another_run_equals_polars(runs, tmp_path) -> None:
    other = Path(shutil.copytree(runs["sample"], tmp_path / "other"))
    frame = pl.read_parquet(other / "judgments.parquet")
    flipped = frame.with_columns(
        pl.when(pl.col("judge") == "length")
        .then(~pl.col("correct"))
        .otherwise(pl.col("correct"))
        .alias("correct")
    )
    flipped.write_parquet(other / "judgments.parquet")
    client = await _client([runs["sample"], other])
    try:
        original = pl.read_parquet(runs["sample"] / "judgments.parquet")
        expected = _keys(original.filter(pl.col("judge") == "length"))
        url = f"/run/{_key(runs['sample'])}/export.jsonl?changed=other"
        assert await _keys_of(client, url) == expected
        page = await (await client.get(f"/run/{_key(runs['sample'])}/judgments?changed=other")).text()
        assert f'<span id="count">{len(expected)}</span>' in page
    finally:
        await client.close()


async def test_table_pages_sorts_and_never_ships_the_whole_table(client, runs) -> None:
    key = _key(runs["sample"])
    frame = pl.read_parquet(runs["sample"] / "judgments.parquet")
    first = await (await client.get(f"/run/{key}/judgments")).text()
    second = await (await client.get(f"/run/{key}/judgments?page=2&sort=judge&desc=1")).text()
    assert f'<span id="count">{frame.height}</span>' in first
    assert first.count("<tr data-pair=") == 50
    expected = frame.sort(["judge", "pair_id", "context"], descending=[True, False, False]).slice(50, 50)
    shown = re.findall(r'<tr data-pair="([^"]+)">', second)
    assert shown == expected["pair_id"].to_list()
    assert "page 2 of" in second


async def test_pages_of_each_kind_answer(client, runs) -> None:
    key = _key(runs["sample"])
    assert "Dataset sample" in await (await client.get("/")).text()
    run_page = await (await client.get(f"/run/{key}")).text()
    assert "Leaderboard" in run_page and "<svg" in run_page
    assert f"/run/{key}/judgments?judge=length&amp;context=none" in run_page
    pair = await (await client.get(f"/run/{key}/pair/ae-001?judge=length&context=none")).text()
    assert "Question" in pair and 'id="standard"' in pair
    compare = await client.get(f"/compare?run={key}&run={_key(runs['llm'])}")
    assert compare.status == 200 and "Compared" in await compare.text()


async def test_pair_page_marks_verdicts_quotes_and_causes(client, runs) -> None:
    html = await (await client.get(f"/run/{_key(runs['llm'])}/pair/t-002")).text()
    assert '<span class="verdict">Result: A</span>' in html
    assert '<span class="quote">&gt; A used manual rangefinder is cheap</span>' in html
    assert '<span class="reasoning">&lt;think&gt;Which fits?&lt;/think&gt;</span>' in html
    assert "chosen shown as A" in html and "chosen shown as B" in html
    failed = await (await client.get(f"/run/{_key(runs['llm'])}/pair/t-006")).text()
    assert "cause rate_limited" in failed and "429 Too Many Requests" in failed
    assert "p_chosen 0.8" in await (await client.get(f"/run/{_key(runs['llm'])}/pair/t-002")).text()


async def test_texts_holding_html_are_shown_as_text(client, runs) -> None:
    html = await (await client.get(f"/run/{_key(runs['llm'])}/pair/t-001")).text()
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert SCRIPT not in html and "<img" not in html and "<b>film" not in html


async def test_a_bad_run_directory_gets_a_page_not_a_traceback(client, runs) -> None:
    listing = await (await client.get("/")).text()
    assert "Folders that could not be read" in listing and "broken-run" in listing
    response = await client.get("/run/broken-run")
    text = await response.text()
    assert response.status == 422 and "invalid JSON" in text and "Traceback" not in text
    missing = await client.get("/run/no-such-run/judgments")
    assert missing.status == 404 and "No such run" in await missing.text()


def _fingerprints(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


async def test_a_label_needs_the_token_and_lands_in_labels_jsonl_only(copies) -> None:
    run = copies["llm"]
    before = _fingerprints(run)
    client = await _client([run], token="secret-token")
    try:
        form = {"preference": "B", "shown_as_a": "chosen", "note": "B <b>fits</b> better"}
        refused = await client.post(f"/run/{run.name}/pair/t-002/label", data=form, allow_redirects=False)
        assert refused.status == 403 and not (run / rundir.LABELS_FILE).exists()
        wrong = await client.post(
            f"/run/{run.name}/pair/t-002/label", data={**form, "token": "guess"}, allow_redirects=False
        )
        assert wrong.status == 403 and not (run / rundir.LABELS_FILE).exists()
        saved = await client.post(
            f"/run/{run.name}/pair/t-002/label?outcome=wrong",
            data={**form, "token": "secret-token"},
            allow_redirects=False,
        )
        assert saved.status == 303
        assert saved.headers["Location"] == f"/run/{run.name}/pair/t-002?outcome=wrong&saved=1"
        (label,) = rundir.read_labels(run)
        assert (label.pair_id, label.preference, label.reviewer, label.slot) == (
            "t-002",
            "rejected",
            "alice",
            "B",
        )
        page = await (await client.get(f"/run/{run.name}/pair/t-002")).text()
        assert "alice" in page and "B &lt;b&gt;fits&lt;/b&gt; better" in page
        exported = await (await client.get(f"/run/{run.name}/export.jsonl?judge=judge-x")).text()
        labelled = {
            r["pair_id"]: (r["human_label"], r["human_labels"])
            for r in map(json.loads, exported.splitlines())
        }
        assert labelled["t-002"] == ("rejected", 1) and labelled["t-001"] == (None, None)
    finally:
        await client.close()
    after = _fingerprints(run)
    assert {k: v for k, v in after.items() if k != rundir.LABELS_FILE} == before


async def test_requests_for_paths_outside_the_run_are_refused(client, runs, tmp_path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("SECRET", encoding="utf-8")
    run = runs["sample"]
    link = run / "plots" / "escape.svg"
    link.symlink_to(outside)
    try:
        ok = await client.get(f"/run/{run.name}/files/summary.json")
        assert ok.status == 200 and "results" in await ok.text()
        host, port = client.server.host, client.server.port
        for path in (
            f"/run/{run.name}/files/../../secret.txt",
            f"/run/{run.name}/files/%2e%2e/%2e%2e/secret.txt",
            f"/run/{run.name}/files/..%2f..%2fsecret.txt",
            f"/run/{run.name}/files/plots/escape.svg",
            f"/run/{run.name}/files/{outside}",
            "/static/..%2f..%2fcli%2f__init__.py",
        ):
            status, body = await asyncio.to_thread(_raw_get, host, port, path)
            assert status in (400, 404), (path, status)
            assert "SECRET" not in body and "click" not in body, path
    finally:
        link.unlink()


def _raw_get(host: str, port: int, path: str, headers: str = "") -> tuple[int, str]:
    """A request sent byte for byte as written (no client normalises the `..` away)."""
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{headers}Connection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode("utf-8", "replace")


async def test_a_page_asked_for_under_another_host_name_is_refused(runs) -> None:
    client = await _client([runs["sample"]])
    try:
        assert (await client.get("/")).status == 200
        status, _ = await asyncio.to_thread(_raw_get_host, client.server.port)
        assert status == 421
    finally:
        await client.close()


def _raw_get_host(port: int) -> tuple[int, str]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(f"GET / HTTP/1.1\r\nHost: evil.example:{port}\r\nConnection: close\r\n\r\n".encode())
        data = sock.recv(65536)
    return int(data.split()[1]), ""


def test_labels_reach_the_agreement_figures(copies) -> None:
    from prbj.data.labels import Label

    run = copies["sample"]
    shown = {"ae-001": "chosen", "ae-002": "rejected", "ae-003": "chosen", "ae-004": "rejected"}
    picks = {
        "alice": ["chosen", "chosen", "rejected", "chosen"],
        "bob": ["chosen", "chosen", "chosen", "cant_tell"],
    }
    for reviewer, prefs in picks.items():
        for (pair_id, a), pref in zip(shown.items(), prefs, strict=True):
            rundir.append_label(
                run, Label(pair_id, pref, reviewer, "2026-01-01T00:00:00+00:00", shown_as_a=a)
            )  # type: ignore[arg-type]
    result = CliRunner().invoke(main, ["build", "agreement", str(run)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads((run / rundir.LABEL_AGREEMENT_FILE).read_text(encoding="utf-8"))
    alice, bob = report["with_benchmark"]
    # alice: slots said A, B, B, B vs truth A, B, A, B -> observed 0.75, chance 1/4·1/2 + 3/4·1/2 -> κ 0.5.
    assert alice["agrees_with_benchmark"] == 0.75 and alice["kappa"] == 0.5
    # bob: A, B, A, cant_tell vs A, B, A, B: p_o 0.75, chance (2/4·2/4)+(1/4·2/4) = 0.375 -> κ 0.6.
    assert bob["agrees_with_benchmark"] == 1.0 and bob["kappa"] == 0.6
    (between,) = report["between_reviewers"]
    assert between["n_pairs"] == 4 and between["same_label"] == 0.5
    assert "alice" in result.output and "bob" in result.output


def test_cli_bundle_writes_a_static_site_whose_links_resolve(runs, tmp_path) -> None:
    site = tmp_path / "site"
    result = CliRunner().invoke(
        main, ["view", str(runs["sample"]), str(runs["llm"]), str(runs["broken"]), "--bundle", str(site)]
    )
    assert result.exit_code == 0, result.output
    pages = list(site.rglob("*.html"))
    assert (site / "index.html").is_file() and len(pages) > 60
    missing = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<form" not in text or (page.name == "index.html" and 'method="post"' not in text)
        for href in re.findall(r'(?:href|src)="([^"#]+)"', text):
            if urlsplit(href).scheme or not (page.parent / unquote(href)).resolve().is_file():
                missing.append((page, href))
    assert not missing, missing[:5]
    pair = (site / "run" / runs["llm"].name / "pair" / "t-001.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;" in pair and SCRIPT not in pair and 'name="token"' not in pair


def test_view_fills_annotation_sheets_that_agreement_reads(tmp_path) -> None:
    from test_build_annotation import annotate, make_build_dir

    build = make_build_dir(tmp_path)
    folder = annotate(build)
    key_text = (folder / "key.csv").read_text(encoding="utf-8-sig")

    async def fill() -> None:
        client = await _client([build], token="t")
        try:
            listing = await (await client.get(f"/build/{build.name}")).text()
            assert "sheet-1" in listing
            for sheet in ("sheet-1", "sheet-2"):
                for item in range(1, 5):
                    page = await (await client.get(f"/build/{build.name}/sheet/{sheet}/{item}")).text()
                    for row in csv.DictReader(key_text.splitlines()):
                        assert row["pair_id"] not in page  # the key is never shown
                    form = dict.fromkeys(RATING_COLUMNS, "4")
                    form |= {
                        "a_adherence": "5",
                        "b_adherence": "2",
                        "preference": "A",
                        "comment": "fine",
                        "token": "t",
                    }
                    saved = await client.post(
                        f"/build/{build.name}/sheet/{sheet}/{item}", data=form, allow_redirects=False
                    )
                    assert saved.status == 303
            bad = await client.post(
                f"/build/{build.name}/sheet/sheet-1/1",
                data={"token": "t", "preference": "A"},
                allow_redirects=False,
            )
            assert bad.status == 400 and "a_factuality" in await bad.text()
        finally:
            await client.close()

    asyncio.run(fill())
    sheets = [str(folder / "sheet-1.csv"), str(folder / "sheet-2.csv")]
    result = CliRunner().invoke(main, ["build", "agreement", str(build), *sheets], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads((folder / "agreement.json").read_text(encoding="utf-8"))
    assert report["n_pairs"] == 4 and report["means"]["annotators"]["n"] == 8


def test_the_wheel_ships_every_template_and_asset(tmp_path) -> None:
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    view = ROOT / "prbj" / "view"
    shipped = [p for folder in ("templates", "static") for p in (view / folder).iterdir()]
    assert shipped and all(f"prbj/view/{p.parent.name}/{p.name}" in names for p in shipped)


@pytest.mark.processes
def test_the_command_serves_on_loopback_and_stops_on_ctrl_c(runs) -> None:
    import os
    import signal
    import urllib.request

    process = subprocess.Popen(
        [sys.executable, "-m", "prbj", "view", str(runs["sample"]), "--port", "0", "--reviewer", "ann"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line + process.stderr.read() if process.stderr else line
        with urllib.request.urlopen(
            url.group(0) + f"run/{runs['sample'].name}/judgments", timeout=60
        ) as page:
            html = page.read().decode()
        assert "reviewer: <bdi>ann</bdi>" in html and '<span id="count">240</span>' in html
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
    assert code == 0


def test_the_ci_example_writes_and_uploads_the_bundle(runs, tmp_path, monkeypatch) -> None:
    import shlex

    import yaml

    workflow = yaml.safe_load(
        (ROOT / "examples" / "github-actions-judge-gate.yml").read_text(encoding="utf-8")
    )
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    (step,) = [s for s in steps if s.get("run", "").startswith("prbj view")]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact") and "if" in s)
    args = shlex.split(step["run"])
    assert args[args.index("--bundle") + 1].rstrip("/") + "/" in upload["with"]["path"].split()
    shutil.copytree(runs["sample"], tmp_path / "runs" / runs["sample"].name)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, args[1:])
    assert result.exit_code == 0, result.output
    assert (tmp_path / args[args.index("--bundle") + 1] / "index.html").is_file()


async def test_a_page_that_fails_says_so_in_a_page(client, runs, monkeypatch) -> None:
    from prbj.view import pair

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no luck")

    monkeypatch.setattr(pair, "pair_page", broken)
    response = await client.get(f"/run/{_key(runs['sample'])}/pair/ae-001")
    text = await response.text()
    assert response.status == 500 and "RuntimeError: no luck" in text and "Traceback" not in text


def test_without_runs_the_command_says_so(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for args in (["view"], ["view", "no-such-dir"]):
        result = runner.invoke(main, args)
        assert result.exit_code == 2 and "error:" in result.output, result.output
    (tmp_path / "reports" / "baselines").mkdir(parents=True)
    result = runner.invoke(main, ["view", "--bundle", "site"])
    assert result.exit_code == 2 and "no run directory in reports/" in result.output


async def test_an_abstention_is_its_own_outcome_never_a_failure(copies) -> None:
    """A verdict withheld by --selective (status abstained) is counted apart, as the run's figures count it."""
    path = copies["llm"] / "judgments.parquet"
    frame = pl.read_parquet(path)
    ok_rows = frame.filter(pl.col("status") == "ok")
    withheld = ok_rows.head(1).select("pair_id", "judge", "context")
    marked = frame.join(
        withheld.with_columns(pl.lit(True).alias("_w")), on=["pair_id", "judge", "context"], how="left"
    )
    frame = marked.with_columns(
        pl.when(pl.col("_w")).then(pl.lit("abstained")).otherwise(pl.col("status")).alias("status")
    ).drop("_w")
    frame.write_parquet(path)
    client = await _client([copies["llm"]])
    try:
        key = _key(copies["llm"])
        assert await _keys_of(client, f"/run/{key}/export.jsonl?outcome=abstained") == _keys(withheld)
        failed = await _keys_of(client, f"/run/{key}/export.jsonl?outcome=failed")
        assert failed == _keys(frame.filter(~pl.col("status").is_in(["ok", "abstained", "dry_run"])))
        assert not failed & _keys(withheld)
        page = await client.get(f"/run/{key}/judgments?outcome=abstained")
        assert page.status == 200
        assert 'class="outcome-abstained">abstained<' in await page.text()
    finally:
        await client.close()
