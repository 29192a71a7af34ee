"""CSV formula injection (issue 31): every CSV prbj writes from dataset or run text (the viewer's export.csv, the
annotation sheets and their key) starts no cell with a formula character, and prbj's readers of its own sheets
give every text back exactly, a 1 MB answer included."""

from __future__ import annotations

import asyncio
import csv
import io
import itertools
import json
from pathlib import Path

import polars as pl
import pytest
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner

from conftest import SUBSET_NAMES, make_record, write_jsonl
from prbj.cli import main
from prbj.data.annotation import read_csv, read_sheet_rows
from prbj.data.csv_cells import ESCAPE, FORMULA_STARTS, neutralise, neutralise_frame, restore
from prbj.view.catalog import Catalog
from prbj.view.server import Viewer, make_app
from run_dirs import judgment, write_run_dir

HYPERLINK = '=HYPERLINK("http://evil.example","x")'
TRICKY = [
    HYPERLINK,
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1,2)",
    "\t=1",
    "\r=1",
    "'=already quoted",
    "''+two quotes",
    "'plain quote",
    "plain text",
    "",
    "a = b",
    "- a bullet",
]


def _raw_cells(text: str) -> list[str]:
    """Every cell of a CSV as a spreadsheet program receives it (no prbj reader in between)."""
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def _is_formula(cell: str) -> bool:
    """Whether a spreadsheet would evaluate the cell (a number such as -0.5 is only a number)."""
    try:
        float(cell)
    except ValueError:
        return cell[:1] in tuple(FORMULA_STARTS)
    return False


@pytest.mark.parametrize("text", TRICKY)
def test_neutralise_then_restore_gives_the_text_back(text: str) -> None:
    written = neutralise(text)
    assert not _is_formula(written)
    assert restore(written) == text
    assert (written == text) == (not any(text.lstrip(ESCAPE).startswith(c) for c in FORMULA_STARTS))


def test_every_short_text_over_the_special_characters_round_trips() -> None:
    alphabet = [*FORMULA_STARTS, ESCAPE, "a", " "]
    for size in range(4):
        for chars in itertools.product(alphabet, repeat=size):
            text = "".join(chars)
            assert restore(neutralise(text)) == text and not _is_formula(neutralise(text)), repr(text)


def test_neutralise_frame_matches_neutralise_and_leaves_numbers() -> None:
    frame = pl.DataFrame({"text": TRICKY, "margin": [-1.5] * len(TRICKY)})
    out = neutralise_frame(frame)
    assert out["text"].to_list() == [neutralise(t) for t in TRICKY]
    assert out["margin"].to_list() == frame["margin"].to_list()


def _build(tmp_path: Path, texts: list[str], big: str) -> Path:
    out = tmp_path / "build"
    out.mkdir()
    records = []
    for i, text in enumerate(texts, start=1):
        record = make_record(i, SUBSET_NAMES[i % 3], id=f"{text or 'empty'}#{i}")
        record["question"] = text
        record["chosen"] = big if i == 1 else f"{text} (chosen)"
        record["rejected"] = text
        records.append(record)
    write_jsonl(out / "pairs.jsonl", records)
    provenance = [{"id": r["id"], "plan": {"aspects": [HYPERLINK]}, "checks": {}} for r in records]
    write_jsonl(out / "provenance.jsonl", provenance)
    return out


def test_annotation_sheets_hold_no_formula_and_read_back_exactly(tmp_path: Path) -> None:
    big = "-" + "long answer " * 90_000  # ~1 MB, past the csv module's default field limit
    texts = [t for t in TRICKY if t]
    build = _build(tmp_path, texts, big)
    result = CliRunner().invoke(
        main, ["build", "annotate", str(build), "--annotators", "2", "--sample", str(len(texts))]
    )
    assert result.exit_code == 0, result.output
    folder = build / "annotation"
    pairs = {
        json.loads(line)["id"]: json.loads(line) for line in (build / "pairs.jsonl").read_text().splitlines()
    }
    for sheet in (folder / "sheet-1.csv", folder / "sheet-2.csv", folder / "key.csv"):
        raw = sheet.read_text(encoding="utf-8-sig")
        csv.field_size_limit(1 << 30)
        assert not [cell for cell in _raw_cells(raw) if _is_formula(cell)], sheet
    _, key = read_csv(folder / "key.csv")
    assert {row["pair_id"] for row in key} == set(pairs)
    _, rows = read_sheet_rows(folder / "sheet-1.csv")
    by_item = {row["item"]: row for row in rows}
    for entry in (row for row in key if row["sheet"] == "sheet-1"):
        pair, row = pairs[entry["pair_id"]], by_item[entry["item"]]
        shown = (pair["chosen"], pair["rejected"])
        assert row["question"] == pair["question"]
        assert (row["answer_a"], row["answer_b"]) == (shown if entry["answer_a"] == "chosen" else shown[::-1])
        assert row["aspects"].endswith(HYPERLINK)
    assert any(row["answer_a"] == big or row["answer_b"] == big for row in rows)
    # Filled in the viewer (the whole sheet read and written again) and read by `prbj build agreement`.
    asyncio.run(_fill_in_the_viewer(build, len(texts)))
    assert read_sheet_rows(folder / "sheet-1.csv")[1][0]["question"] == by_item["1"]["question"]
    sheets = [str(folder / "sheet-1.csv"), str(folder / "sheet-2.csv")]
    agreement = CliRunner().invoke(main, ["build", "agreement", str(build), *sheets])
    assert agreement.exit_code == 0, agreement.output
    report = json.loads((folder / "agreement.json").read_text(encoding="utf-8"))
    assert report["n_pairs"] == len(texts)
    _, after = read_sheet_rows(folder / "sheet-1.csv")
    for before_row, after_row in zip(rows, after, strict=True):
        assert {k: after_row[k] for k in ("question", "answer_a", "answer_b")} == {
            k: before_row[k] for k in ("question", "answer_a", "answer_b")
        }
        assert after_row["comment"] == "=1+1 fine"


async def _fill_in_the_viewer(build: Path, items: int) -> None:
    client = TestClient(TestServer(make_app(Viewer(Catalog.open([build]), "alice", token="t"))))
    await client.start_server()
    try:
        for sheet in ("sheet-1", "sheet-2"):
            for item in range(1, items + 1):
                page = await client.get(f"/build/{build.name}/sheet/{sheet}/{item}")
                assert page.status == 200
                form = {
                    f"{side}_{d}": "4"
                    for side in "ab"
                    for d in ("factuality", "relevance", "helpfulness", "adherence")
                }
                form |= {"preference": "A", "comment": "=1+1 fine", "token": "t"}
                saved = await client.post(
                    f"/build/{build.name}/sheet/{sheet}/{item}", data=form, allow_redirects=False
                )
                assert saved.status == 303, await saved.text()
    finally:
        await client.close()


async def test_the_viewer_export_csv_holds_no_formula(tmp_path: Path) -> None:
    rows = [
        judgment(HYPERLINK, "=cmd|' /C calc'!A0", "@judge", error="-oops", margin=-0.5),
        judgment("plain", "Society_and_Culture", "@judge", margin=0.25),
    ]
    run = write_run_dir(tmp_path / "run", rows)
    client = TestClient(TestServer(make_app(Viewer(Catalog.open([run]), "alice"))))
    await client.start_server()
    try:
        answer = await client.get("/run/run/export.csv")
        assert answer.status == 200
        text = await answer.text()
    finally:
        await client.close()
    assert not [cell for cell in _raw_cells(text) if _is_formula(cell)]
    table = pl.read_csv(io.StringIO(text))
    assert table["pair_id"].to_list() == [ESCAPE + HYPERLINK, "plain"]
    assert table["judge"].to_list() == ["'@judge", "'@judge"]
    assert table["margin"].to_list() == [-0.5, 0.25]  # numbers stay numbers
    assert [restore(v) for v in table["pair_id"].to_list()] == [HYPERLINK, "plain"]
