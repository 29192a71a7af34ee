"""The viewer's User page on a run whose users have several pairs: the user's history as a judge sees it in the
`profile` context (never the scoring standard), their items with each judge's outcome, each judge's accuracy for
them; linked from pair pages, escaped, served live and written into the static bundle."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import pytest
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner
from markupsafe import escape
from view_runs import SCRIPT, html_dataset, sample_run

from prbj.cli import main
from prbj.data.loaders import load_dataset
from prbj.view.catalog import Catalog
from prbj.view.links import LiveLinks, file_slug
from prbj.view.server import Viewer, make_app
from run_dirs import judgment, write_run_dir

ROOT = Path(__file__).resolve().parents[1]
# A user id holding markup: shown as text everywhere, and a safe file name in the bundle.
ODD_USER = "<b>u&1</b>"
OWNER = {"t-001": ODD_USER, "t-002": ODD_USER, "t-003": ODD_USER, "t-004": "u2", "t-005": "u2", "t-006": "u2"}


def user_run(folder: Path) -> Path:
    dataset = html_dataset(folder / "pairs.jsonl")
    rows = []
    for i in range(1, 7):
        pair_id = f"t-{i:03d}"
        extra = {"user_id": OWNER[pair_id], "group:age": "18-24" if i <= 3 else "25-34"}
        # judge-x: right on t-001 and t-002, wrong on t-003, a failure on t-004; judge-y: right everywhere.
        status = "api_error" if i == 4 else "ok"
        rows.append(
            judgment(pair_id, "S", "judge-x", context="profile", correct=i <= 2, status=status) | extra
        )
        rows.append(judgment(pair_id, "S", "judge-y", context="none", correct=True) | extra)
    fingerprint = load_dataset(str(dataset)).fingerprint()
    return write_run_dir(folder / "run-users", rows, source=str(dataset), fingerprint=fingerprint)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("view-users")
    return {"users": user_run(base), "sample": sample_run(base / "reports")}


@pytest.fixture
async def client(runs: dict[str, Path]) -> AsyncIterator[TestClient]:
    catalog = Catalog.open([runs["users"], runs["sample"]])
    client = TestClient(TestServer(make_app(Viewer(catalog, "alice"))))
    await client.start_server()
    yield client
    await client.close()


def _user_url(run: Path, user: str) -> str:
    return f"/run/{run.name}/user/{quote(user, safe='')}"


async def test_the_user_page_shows_history_items_and_each_judge(
    client: TestClient, runs: dict[str, Path]
) -> None:
    response = await client.get(_user_url(runs["users"], ODD_USER))
    assert response.status == 200
    html = await response.text()
    # The id and the history's markup are text, never markup.
    assert "&lt;b&gt;u&amp;1&lt;/b&gt;" in html and ODD_USER not in html
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html and SCRIPT not in html
    # The history is the judge's view in the profile context: posts, and never the scoring standard.
    assert "Developing my own rolls at home lately." in html
    assert "SECRET-NARRATIVE" not in html and "SECRET-ASPECT" not in html
    # Their items, each linked to its pair page, with each judge's outcome.
    items = re.search(r'<table id="user-items">(.*?)</table>', html, re.S)
    assert items is not None
    for pair_id in ("t-001", "t-002", "t-003"):
        assert f'href="/run/{runs["users"].name}/pair/{pair_id}"' in items.group(1)
    assert "t-004" not in items.group(1)
    assert items.group(1).count('class="outcome-correct"') == 5 and items.group(1).count("outcome-wrong") == 1
    # judge-x: 2 of 3 decided; judge-y: 3 of 3.
    judges = re.search(r'<table id="user-judges">(.*?)</table>', html, re.S)
    assert judges is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", judges.group(1))
    assert cells == ["judge-x", "profile", "3", "3", "2", "66.7", "judge-y", "none", "3", "3", "3", "100.0"]
    assert "age: <strong>18-24</strong>" in html


async def test_a_failed_judgment_is_not_decided_for_its_user(
    client: TestClient, runs: dict[str, Path]
) -> None:
    html = await (await client.get(_user_url(runs["users"], "u2"))).text()
    judges = re.search(r'<table id="user-judges">(.*?)</table>', html, re.S)
    assert judges is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", judges.group(1))
    assert cells[:6] == ["judge-x", "profile", "3", "2", "0", "0.0"]
    assert 'class="outcome-failed">failed' in html


async def test_pair_pages_link_to_their_user_and_unknown_users_are_404(
    client: TestClient, runs: dict[str, Path]
) -> None:
    pair = await (await client.get(f"/run/{runs['users'].name}/pair/t-002")).text()
    assert f'id="user-link" href="{_user_url(runs["users"], ODD_USER)}"' in pair
    missing = await client.get(_user_url(runs["users"], "nobody"))
    assert missing.status == 404 and "No such user" in await missing.text()
    # PRB: one pair per user, no user pages and no links to them.
    sample = runs["sample"].name
    (first,) = (await (await client.get(f"/run/{sample}/judgments")).text()).split('class="open" href="')[1:2]
    page = await (await client.get(first.split('"')[0])).text()
    assert "user-link" not in page
    assert (await client.get(f"/run/{sample}/user/anyone")).status == 404


def test_the_bundle_writes_every_user_page_with_links_that_resolve(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    result = CliRunner().invoke(main, ["view", str(runs["users"]), "--bundle", str(site)])
    assert result.exit_code == 0, result.output
    users_dir = site / "run" / runs["users"].name / "user"
    assert sorted(p.name for p in users_dir.iterdir()) == sorted(
        f"{file_slug(u)}.html" for u in {ODD_USER, "u2"}
    )
    page = (users_dir / f"{file_slug(ODD_USER)}.html").read_text(encoding="utf-8")
    assert "&lt;b&gt;u&amp;1&lt;/b&gt;" in page and SCRIPT not in page and "SECRET-NARRATIVE" not in page
    missing = []
    for html in site.rglob("*.html"):
        for href in re.findall(r'(?:href|src)="([^"#]+)"', html.read_text(encoding="utf-8")):
            if urlsplit(href).scheme or not (html.parent / unquote(href)).resolve().is_file():
                missing.append((html, href))
    assert not missing, missing[:5]
    pair = (site / "run" / runs["users"].name / "pair" / "t-001.html").read_text(encoding="utf-8")
    assert f'/run/{runs["users"].name}/user/{file_slug(ODD_USER)}.html" ' in pair.replace('">', '" ')


async def test_users_whose_ids_a_path_cannot_hold_are_reachable(tmp_path: Path) -> None:
    users = [".", "..", "a/b"]
    rows = [
        judgment(f"p{2 * n + k}", "S", "j", correct=k == 0) | {"user_id": user}
        for n, user in enumerate(users)
        for k in range(2)
    ]
    run_dir = write_run_dir(tmp_path / "run-dots", rows)
    client = TestClient(TestServer(make_app(Viewer(Catalog.open([run_dir]), "alice"))))
    await client.start_server()
    try:
        for n, user in enumerate(users):
            link = LiveLinks().user(run_dir.name, user)
            pair = await (await client.get(f"/run/{run_dir.name}/pair/p{2 * n}")).text()
            assert f'id="user-link" href="{escape(link)}"' in pair
            page = await client.get(link)
            assert page.status == 200, link
            assert f'<span id="user-id"><bdi>{escape(user)}</bdi></span>' in await page.text()
    finally:
        await client.close()


def test_a_per_user_benchmark_s_user_page_shows_their_earlier_choices_only(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["judge", "--benchmark", "personal-reward-bench", "--no-progress", "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.output
    (run_dir,) = list((tmp_path / "r").iterdir())
    sample = ROOT / "prbj" / "data" / "benchmarks" / "personal-reward-bench" / "preferences.jsonl"
    rows = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]
    user = rows[0]["user_id"]
    site = tmp_path / "site"
    assert CliRunner().invoke(main, ["view", str(run_dir), "--bundle", str(site)]).exit_code == 0
    page = (site / "run" / run_dir.name / "user" / f"{file_slug(user)}.html").read_text(encoding="utf-8")
    history = page.split('<div id="user-profile">', 1)[1].split("</div>\n", 1)[0]
    for row in rows:
        prompt = escape(row["context"][-1]["content"])
        # Their train and val rows are the history; their test rows and every other user's rows are not.
        own_history = row["user_id"] == user and row.get("split", "test") != "test"
        assert (prompt in history) == own_history, (row["user_id"], row.get("split"), prompt)
    assert "Earlier choices" in history and "Preferred:" in history
