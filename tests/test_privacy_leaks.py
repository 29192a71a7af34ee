"""Issue 42's acceptance: personal markers of every kind planted in per-user data (tests/privacy_fixture.py) reach
no request, cache, run directory, report or export of a `--personal-data pseudonymized` run, and the same run
under `any` shows them everywhere the test looks (so the test can fail). A recording loopback provider answers
every request by quoting it whole, the worst a judge can do.

Which kinds are found by what (privacy_fixture.COVERED_BY): names, places and employers by the test's NER
pipeline (an entity ruler: a real run needs a real spaCy model for them), conditions only because the test lists
them with --pseudonymize-terms (nothing finds a condition otherwise), everything else by patterns."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from loopback import ChatRequest, ProviderServer
from privacy_fixture import COVERED_BY, MARKERS, every_marker, leak_records, ner_pipeline, terms_file

from conftest import write_jsonl
from prbj.cli import main

KEYS = {"OPENAI_API_KEY": "dummy-key-for-the-loopback"}
FORMATS = (("csv", "judgments.csv"), ("parquet", "judgments.parquet"), ("eee", "eee"), ("inspect", "inspect"))


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        # Quote everything the model was shown, then a verdict: whatever was sent is in every reply.
        running.reply = lambda request: _quoting(request)
        yield running


def _quoting(request: ChatRequest) -> str:
    return f"You wrote: {request.prompt}\nResult: A"


def cli(*args: str, env: dict[str, str]) -> str:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False, terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def texts_under(folder: Path) -> dict[Path, str]:
    """Every file's text, Parquet cells decoded (its pages are compressed), Inspect logs unzipped."""
    import zipfile

    found: dict[Path, str] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        text = data.decode("utf-8", errors="replace")
        if path.suffix == ".parquet":
            frame = pl.read_parquet(path)
            text += json.dumps(frame.select(pl.col(pl.String)).to_dicts(), ensure_ascii=False)
        elif path.suffix == ".eval":
            with zipfile.ZipFile(path) as archive:
                text += "".join(archive.read(name).decode("utf-8", "replace") for name in archive.namelist())
        found[path] = text
    return found


def leaked(folder: Path) -> dict[str, list[str]]:
    """Planted marker → the files under `folder` that hold it."""
    files = texts_under(folder)
    return {m: [str(p) for p, text in files.items() if m in text] for m in every_marker() if m in str(files)}


def run_everything(
    tmp_path: Path, server: ProviderServer, policy: str, records: list[dict[str, Any]] | None = None
) -> dict[str, Path]:
    """Judge the planted data (`records`, default leak_records()) under `policy`, report it, export it in every
    format (with and without the texts as sent); the folders each output went to."""
    root = tmp_path / policy
    root.mkdir()
    env = {**KEYS, "PRBJ_PRIVATE_DIR": str(root / "private")}
    dataset = write_jsonl(root / "users.jsonl", leak_records() if records is None else records)
    cli(
        "judge", "--no-progress", "--dataset", str(dataset), "-p", "gpt-5.1", "--api-base", server.url,
        "--context", "profile", "--context", "swapped-profile", "--personal-data", policy,
        "--ner-model", str(ner_pipeline(root / "ner")), "--pseudonymize-terms", str(terms_file(root)),
        "--cache-dir", str(root / "cache"), "--out", str(root / "runs"),
        env=env,
    )  # fmt: skip
    [run_dir] = [p for p in (root / "runs").iterdir() if p.is_dir()]
    cli("report", str(run_dir), "--out", str(root / "report"), env=env)
    for fmt, target in FORMATS:
        cli("export", str(run_dir), "--format", fmt, "--out", str(root / "exports" / target), env=env)
        if policy == "pseudonymized":
            cli(
                "export", str(run_dir), "--format", fmt, "--out", str(root / "exports-as-sent" / target),
                "--include-texts", "--include-profiles", env=env,
            )  # fmt: skip
    return {
        "cache": root / "cache",
        "run directory": run_dir,
        "report": root / "report",
        "exports": root / "exports",
        **({"exports as sent": root / "exports-as-sent"} if policy == "pseudonymized" else {}),
    }


def test_every_marker_kind_is_covered_by_a_stated_mechanism() -> None:
    assert set(MARKERS) == set(COVERED_BY)
    assert set(COVERED_BY.values()) == {"patterns", "test NER pipeline", "--pseudonymize-terms"}


def test_pseudonymized_sends_caches_files_reports_and_exports_no_planted_marker(
    tmp_path: Path, server: ProviderServer
) -> None:
    server.reset()
    places = run_everything(tmp_path, server, "pseudonymized")
    bodies = [json.dumps(r.body, ensure_ascii=False) for r in server.requests]
    assert len(bodies) >= 12  # 6 judged pairs x 2 contexts
    in_requests = {m: sum(m in body for body in bodies) for m in every_marker()}
    assert {m: n for m, n in in_requests.items() if n} == {}
    # The placeholders arrived instead: the judge still reads who is who.
    sent = "\n".join(bodies)
    for placeholder in ("PERSON_1", "LOCATION_1", "ORGANIZATION_1", "CONDITION_1", "EMAIL_1", "PHONE_1",
                        "ADDRESS_1", "HANDLE_1", "CARD_1", "IBAN_1", "SSN_1", "URL_1", "IP_1", "DATE_1"):  # fmt: skip
        assert placeholder in sent, placeholder
    for where, folder in places.items():
        assert folder.exists() and any(folder.rglob("*")), where
        assert leaked(folder) == {}, where


def test_the_same_run_under_any_shows_the_markers(tmp_path: Path, server: ProviderServer) -> None:
    server.reset()
    places = run_everything(tmp_path, server, "any")
    sent = "\n".join(json.dumps(r.body, ensure_ascii=False) for r in server.requests)
    # Every kind reaches the provider in clear, and lands in the cache, the run files and the exports.
    for kind, markers in MARKERS.items():
        assert any(m in sent for m in markers), kind
    for where in ("cache", "run directory"):
        found = leaked(places[where])
        for kind, markers in MARKERS.items():
            assert any(m in found for m in markers), (where, kind)
    # Exports leave profiles out under every policy (docs/export.md); the judged conversations and answers are in.
    judged = json.dumps([r for r in leak_records() if r["split"] == "test"], ensure_ascii=False)
    found = leaked(places["exports"])
    for kind, markers in MARKERS.items():
        asked = [m for m in markers if m in judged]
        assert not asked or any(m in found for m in asked), kind


def test_every_candidate_of_a_best_of_k_item_is_pseudonymized_wherever_it_goes(
    tmp_path: Path, server: ProviderServer
) -> None:
    """Each judged record made an item of three answers whose third candidate holds markers of its own: under
    `pseudonymized` they reach no request, file or export (the exports as sent carry the third candidate, as
    placeholders); under `any` the exports show them (so the test can fail)."""
    third = "Ask Иван Петров on ivan.petrov@example.com at 3 rue de la Paix; card 5555 5555 5555 4444."
    planted = ("Иван Петров", "ivan.petrov@example.com", "3 rue de la Paix", "5555 5555 5555 4444")
    records = []
    for record in leak_records():
        if record["split"] == "test":
            answers = [record.pop("chosen"), record.pop("rejected"), third]
            record = {**record, "responses": answers, "preferred": 0}
        records.append(record)
    server.reset()
    places = run_everything(tmp_path, server, "pseudonymized", records)
    bodies = "\n".join(json.dumps(r.body, ensure_ascii=False) for r in server.requests)
    assert not [m for m in every_marker() if m in bodies]
    for where, folder in places.items():
        assert leaked(folder) == {}, where
    as_sent = pl.read_parquet(places["exports as sent"] / "judgments.parquet")
    others = [json.loads(cell) for cell in as_sent["other_answers"].to_list()]
    assert others and all(len(cell) == 1 and "PERSON_" in cell[0] and "EMAIL_" in cell[0] for cell in others)
    clear = run_everything(tmp_path, server, "any", records)
    found = leaked(clear["exports"])
    assert all(marker in found for marker in planted)
