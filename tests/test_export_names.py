"""`prbj export` names files from what a run says about itself (run.json's run_id, an EEE file's evaluation_id,
the judge and context of each judgment): untrusted text. Every format, fed hostile values, writes only inside
`--out`, never through a link planted there, and answers an unusable value with one line, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from export_runs import judged_run

from prbj.cli import main
from prbj.data.files import inside, safe_name, write_text

FORMATS = ("eee", "inspect", "csv", "parquet")
HOSTILE = {
    "parent": "../../escaped",
    "absolute": "/tmp/prbj-escaped-absolute",
    "long": "r" * 300,
    "nul": "run\x00id",
    "dots": "..",
    "surrogate": "run-\udc80-id",
    "separators": "a/b\\c:d",
    "newline": "line\nbreak",
    "wide": "é" * 200,
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return judged_run(tmp_path_factory.mktemp("judged"), n=3)


def hostile_copy(run_dir: Path, where: Path, field: str, value: str) -> Path:
    """A copy of the run whose run_id, judge or context is `value`."""
    copy = where / "run"
    shutil.copytree(run_dir, copy)
    if field == "run_id":
        run = json.loads((copy / "run.json").read_text())
        run["run_id"] = value
        (copy / "run.json").write_text(json.dumps(run), encoding="utf-8")
    else:
        frame = pl.read_parquet(copy / "judgments.parquet")
        first = frame[field][0]
        frame = frame.with_columns(
            pl.when(pl.col(field) == first).then(pl.lit(value)).otherwise(pl.col(field)).alias(field)
        )
        if field == "judge":
            run = json.loads((copy / "run.json").read_text())
            for entry in run.get("judges") or []:
                if entry.get("name") == first:
                    entry["name"] = value
            (copy / "run.json").write_text(json.dumps(run), encoding="utf-8")
        frame.write_parquet(copy / "judgments.parquet")
    return copy


def files_under(folder: Path) -> set[Path]:
    return set(folder.rglob("*")) if folder.exists() else set()


def outside(root: Path, out: Path) -> set[Path]:
    """What lies under `root` but neither in `out` nor on the way to it."""
    return {p for p in files_under(root) if not p.is_relative_to(out) and not out.is_relative_to(p)}


def export(*args: str | Path) -> Any:
    return CliRunner().invoke(main, ["export", *map(str, args)])


def assert_one_line_or_ok(result: Any) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    if result.exit_code != 0:
        assert result.exit_code == 2
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("field", ["run_id", "judge", "context"])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_names_stay_inside_out(
    run_dir: Path, tmp_path: Path, fmt: str, field: str, kind: str
) -> None:
    copy = hostile_copy(run_dir, tmp_path, field, HOSTILE[kind])
    out = tmp_path / "deep" / "er" / "out"
    outside_before = outside(tmp_path, out)
    absolute = Path(HOSTILE["absolute"])
    result = export(copy, "--format", fmt, "--out", out)
    assert_one_line_or_ok(result)
    assert outside(tmp_path, out) == outside_before
    assert not absolute.exists() and not absolute.with_suffix(".eval").exists()
    for path in files_under(out):
        assert path.resolve().is_relative_to(out.resolve())
        assert len(path.name.encode()) <= 255
        assert not path.name.startswith(".")  # no hidden file, no temporary left behind
    if result.exit_code == 0:
        assert any(p.is_file() for p in files_under(out))


def written_names(run_dir: Path, fmt: str, where: Path) -> list[Path]:
    """The files `fmt` writes for this run, relative to its --out."""
    out = where / "probe"
    result = export(run_dir, "--format", fmt, "--out", out)
    assert result.exit_code == 0, result.output
    return sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_link_planted_in_out_is_replaced_never_followed(run_dir: Path, tmp_path: Path, fmt: str) -> None:
    names = written_names(run_dir, fmt, tmp_path)
    out = tmp_path / "out"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).symlink_to(victim)
    result = export(run_dir, "--format", fmt, "--out", out)
    assert result.exit_code == 0, result.output
    assert victim.read_text(encoding="utf-8") == "keep me"
    for name in names:
        assert not (out / name).is_symlink() and (out / name).is_file()


def test_a_linked_folder_inside_out_is_refused_in_one_line(run_dir: Path, tmp_path: Path) -> None:
    """EEE files its records in folders under --out: a planted link to a folder elsewhere is not written through."""
    (eee_folder,) = {name.parts[1] for name in written_names(run_dir, "eee", tmp_path)}
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "data").mkdir(parents=True)
    (out / "data" / eee_folder).symlink_to(elsewhere, target_is_directory=True)
    result = export(run_dir, "--format", "eee", "--out", out)
    assert_one_line_or_ok(result)
    assert result.exit_code == 2 and "outside" in result.output
    assert not any(elsewhere.rglob("*"))


def test_an_eee_file_s_evaluation_id_names_no_folder(run_dir: Path, tmp_path: Path) -> None:
    """A published EEE aggregate read as a run: its evaluation_id (the run id) cannot pick where logs go."""
    (aggregate,) = [p for p in written_names(run_dir, "eee", tmp_path) if p.suffix == ".json"][:1]
    source = tmp_path / "probe" / aggregate
    document = json.loads(source.read_text(encoding="utf-8"))
    for kind in ("parent", "long", "nul", "absolute"):
        document["evaluation_id"] = HOSTILE[kind]
        source.write_text(json.dumps(document), encoding="utf-8")
        out = tmp_path / f"logs-{kind}"
        before = outside(tmp_path, out)
        result = export(source, "--format", "inspect", "--out", out)
        assert_one_line_or_ok(result)
        assert result.exit_code == 0, result.output
        assert outside(tmp_path, out) == before
        logs = list(out.iterdir())
        assert logs and all(p.suffix == ".eval" and p.is_file() for p in logs)


@pytest.mark.parametrize("text", [*HOSTILE.values(), "", ".", "...", "-", "CON", "a" * 1000])
def test_safe_name_is_one_short_plain_component(text: str) -> None:
    name = safe_name(text)
    assert name and name not in (".", "..") and not name.startswith((".", "-"))
    assert "/" not in name and "\\" not in name and "\x00" not in name
    assert len(name.encode()) <= 120
    name.encode("utf-8")  # no lone surrogate


def test_safe_names_keep_ordinary_names_and_tell_long_ones_apart() -> None:
    assert safe_name("20260101-120000-gemini-3-flash_profile") == "20260101-120000-gemini-3-flash_profile"
    assert safe_name("x" * 300 + "a") != safe_name("x" * 300 + "b")


def test_inside_refuses_what_leads_out(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link").symlink_to(tmp_path, target_is_directory=True)
    assert inside(tmp_path / "out", "a", "b.json") == (tmp_path / "out" / "a" / "b.json").resolve()
    for parts in (("..", "x"), ("/etc", "passwd"), ("link", "x")):
        with pytest.raises(Exception, match="outside"):
            inside(tmp_path / "out", *parts)


def test_a_link_at_the_temporary_s_name_is_not_written_through(tmp_path: Path) -> None:
    """The temporary sibling a write fills first is created new: a link planted under its (predictable) name is
    removed, not followed."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    target = tmp_path / "out.json"
    (tmp_path / f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(victim)
    write_text(target, "new")
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert target.read_text(encoding="utf-8") == "new" and not target.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_lone_surrogate_in_run_json_is_one_line(run_dir: Path, tmp_path: Path) -> None:
    copy = hostile_copy(run_dir, tmp_path, "run_id", HOSTILE["surrogate"])
    result = export(copy, "--format", "csv", "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert line.startswith("error: ") and "run.json" in line and "surrogate" in line
