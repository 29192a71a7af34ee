"""labels.jsonl is the one file prbj writes into a finished run, and a run may come from elsewhere: only the run's
own regular file is read or written. A symbolic link (to any file the reviewer may write), a hard link, a FIFO or
a folder under that name is refused in one line, and the file it leads to is left as it was."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from view_runs import sample_run

from prbj.data.labels import Label
from prbj.errors import DataError
from prbj.runs import rundir
from prbj.view.catalog import Catalog
from prbj.view.server import Viewer, make_app

# What the victim file holds: its last line unfinished, which an append would cut off before writing.
VICTIM_TEXT = "precious line one\nprecious line two, not ended"


def _label(pair: str = "p1") -> Label:
    return Label(pair, "chosen", "ann", "2026-01-01T00:00:00+00:00", shown_as_a="chosen")


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "elsewhere" / "notes.txt"
    victim.parent.mkdir(exist_ok=True)
    victim.write_text(VICTIM_TEXT, encoding="utf-8")
    return victim


def _plant(run: Path, kind: str, victim: Path) -> None:
    labels = run / rundir.LABELS_FILE
    if kind == "symlink":
        labels.symlink_to(victim)
    elif kind == "hardlink":
        os.link(victim, labels)
    elif kind == "fifo":
        os.mkfifo(labels)
    else:
        labels.mkdir()


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo", "folder"])
def test_a_labels_file_that_is_not_the_run_s_own_is_refused(tmp_path: Path, kind: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    victim = _victim(tmp_path)
    _plant(run, kind, victim)
    with pytest.raises(DataError, match=r"labels\.jsonl: .*refused") as refused:
        rundir.append_label(run, _label())
    assert "\n" not in str(refused.value)
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    with pytest.raises(DataError, match="refused"):
        rundir.read_labels(run)


def test_reading_a_fifo_named_labels_does_not_wait_forever(tmp_path: Path) -> None:
    """Opened without O_NONBLOCK, a FIFO's open waits for a writer that never comes (the viewer's page with it)."""
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / rundir.LABELS_FILE)
    probe = (
        "import sys\nfrom prbj.runs import rundir\nfrom prbj.errors import DataError\n"
        "try:\n    rundir.read_labels(sys.argv[1])\nexcept DataError as err:\n    print(err)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(run)], capture_output=True, text=True, timeout=120
    )
    assert "not a regular file" in done.stdout, done.stdout + done.stderr


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return sample_run(tmp_path / "reports")


async def test_the_viewer_answers_a_planted_link_with_a_page_not_a_write(
    sample: Path, tmp_path: Path
) -> None:
    run = sample
    victim = _victim(tmp_path)
    (run / rundir.LABELS_FILE).symlink_to(victim)
    pair = next(iter(rundir.load_run(run).judgments["pair_id"]))
    client = TestClient(TestServer(make_app(Viewer(Catalog.open([run]), "alice", token="secret-token"))))
    await client.start_server()
    try:
        form = {"preference": "A", "shown_as_a": "chosen", "token": "secret-token"}
        answer = await client.post(f"/run/{run.name}/pair/{pair}/label", data=form, allow_redirects=False)
        assert answer.status == 400 and "symbolic link" in await answer.text()
    finally:
        await client.close()
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT


def test_the_run_s_own_file_still_takes_labels(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    rundir.append_label(run, _label("p1"))
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    rundir.append_label(copy, _label("p2"))
    assert [label.pair_id for label in rundir.read_labels(copy)] == ["p1", "p2"]
