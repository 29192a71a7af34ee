"""Reward models written in Python (`-p py:FILE.py:NAME`, `py:module:NAME`, entry points; issue 40 items 1-2), run
through the real `prbj judge` command on per-user data. The models under test log every call to a file beside
them (tests/plugin_rms.py), so what prbj asked of them is read from the model's side."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from per_user_fixture import HISTORY_ROWS, TEST_ROWS, user_records
from plugin_rms import FIRST_RM, clear_log, expected_score, read_log, write_rm

from conftest import write_jsonl
from prbj.cli import main

ROOT = Path(__file__).resolve().parents[1]
USERS = ("u1", "u2", "u3", "u4", "u5")


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "users.jsonl", user_records(USERS))


def judge(tmp_path: Path, dataset: Path, *args: str, cache: str = "cache") -> tuple[int, str, Path | None]:
    out = tmp_path / "runs"
    before = set(out.iterdir()) if out.exists() else set()
    command = ["judge", "--no-progress", "--dataset", str(dataset), "--cache-dir", str(tmp_path / cache)]
    command += ["--out", str(out), *args]
    # A failure's line is long (it names the file): unwrapped.
    result = CliRunner().invoke(main, command, env={"COLUMNS": "1000"})
    made = sorted(set(out.iterdir()) - before) if out.exists() else []
    return result.exit_code, result.output, made[-1] if made else None


def frame(run_dir: Path) -> pl.DataFrame:
    return pl.read_parquet(run_dir / "judgments.parquet").sort("pair_id")


def history_ids(user: str) -> list[str]:
    """The user's train and val rows, as the loader names rows without an id."""
    return [f"{user}:{n}" for n in range(1, HISTORY_ROWS + 1)]


# --- what the scores imply ------------------------------------------------------------------------------------


def test_accuracy_is_what_the_models_scores_imply(tmp_path: Path, dataset: Path) -> None:
    rm = write_rm(tmp_path)
    code, output, run_dir = judge(tmp_path, dataset, "-p", f"py:{rm}:Logged")
    assert code == 0, output
    assert run_dir is not None
    judgments = frame(run_dir)
    records = {r["id"]: r for r in user_records(USERS) if r["split"] == "test"}
    correct = {}
    for row in judgments.iter_rows(named=True):
        record = records[row["pair_id"]]
        chosen = expected_score(row["pair_id"], record["chosen"]["content"])
        rejected = expected_score(row["pair_id"], record["rejected"])
        assert row["score_chosen"] == pytest.approx(chosen) and row["score_rejected"] == pytest.approx(
            rejected
        )
        correct[row["pair_id"]] = chosen > rejected
    assert 0 < sum(correct.values()) < len(correct)  # the check below could fail either way
    summary = json.loads((run_dir / "summary.json").read_text())
    overall = next(r for r in summary["results"] if r["subset"] == "all")
    assert overall["judge"] == f"py:{rm}:Logged" and overall["context"] == "profile"
    assert overall["accuracy"] == pytest.approx(sum(correct.values()) / len(correct))
    per_user = [sum(correct[f"{u}-test-{n}"] for n in range(1, TEST_ROWS + 1)) / TEST_ROWS for u in USERS]
    assert overall["user_accuracy"] == pytest.approx(sum(per_user) / len(per_user))
    run = json.loads((run_dir / "run.json").read_text())
    (described,) = run["judges"]
    assert described["version"] == "1" and described["rm_name"] == "logged" and described["method"] == "score"
    assert len(described["source_sha256"]) == 64


def test_fit_user_once_per_user_before_their_items_with_only_their_train_and_val_rows(
    tmp_path: Path, dataset: Path
) -> None:
    rm = write_rm(tmp_path)
    code, output, _ = judge(tmp_path, dataset, "-p", f"py:{rm}:Logged", "--batch-size", "3")
    assert code == 0, output
    log = read_log(rm)
    fits = [entry for entry in log if entry["method"] == "fit_user"]
    assert sorted(f["user"] for f in fits) == sorted(USERS)  # once each
    for fit in fits:
        assert fit["history"] == history_ids(fit["user"])  # their own train and val rows, no test row
    fitted: set[str] = set()
    for entry in log:
        if entry["method"] == "fit_user":
            fitted.add(entry["user"])
            continue
        assert len(entry["items"]) <= 3
        for item in entry["items"]:
            assert item["user"] in fitted, "scored before its user was fitted"
            assert item["history"] == history_ids(item["user"])
            assert not any("test" in h for h in item["history"])
            assert item["persona"] is not None and f"PERSONA{item['user']}" in item["persona"]
            assert f"FACT{item['user']}" in item["persona"]
    # Items of several pairs share a batch (the model sees whole batches, not one pair at a time).
    assert max(len(entry["items"]) for entry in log if entry["method"] == "score") == 3


def test_a_rerun_calls_the_model_zero_times_and_a_changed_model_is_judged_again(
    tmp_path: Path, dataset: Path
) -> None:
    rm = write_rm(tmp_path)
    spec = f"py:{rm}:Logged"
    code, output, first = judge(tmp_path, dataset, "-p", spec)
    assert code == 0, output
    assert any(e["method"] == "score" for e in read_log(rm))
    clear_log(rm)
    code, output, again = judge(tmp_path, dataset, "-p", spec)
    assert code == 0, output
    assert read_log(rm) == []  # neither score nor fit_user
    assert first is not None and again is not None
    assert frame(again)["cached"].to_list() == [True] * len(USERS) * TEST_ROWS
    assert (
        frame(again)
        .select("score_chosen", "score_rejected")
        .equals(frame(first).select("score_chosen", "score_rejected"))
    )
    # A new version is judged again...
    write_rm(tmp_path, version="2")
    code, output, _ = judge(tmp_path, dataset, "-p", spec)
    assert code == 0, output
    assert sum(len(e["items"]) for e in read_log(rm) if e["method"] == "score") == 2 * len(USERS) * TEST_ROWS
    # ... and so is an edited file whose version did not change.
    clear_log(rm)
    rm.write_text(rm.read_text() + "\n# a comment is an edit\n")
    code, output, _ = judge(tmp_path, dataset, "-p", spec)
    assert code == 0, output
    assert any(e["method"] == "score" for e in read_log(rm))


# --- failures ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "cause", "message"),
    [
        (
            "raise",
            "score raised ValueError",
            "score raised ValueError: the model broke with a second line on pair",
        ),
        (
            "count",
            "score returned a wrong count",
            "score returned 2 values for a batch of 1 item, the first pair",
        ),
        ("nan", "score returned nan", "score returned nan for pair"),
        ("inf", "score returned inf", "score returned inf for pair"),
    ],
)
def test_each_bad_output_fails_its_items_in_one_line_and_is_never_cached(
    tmp_path: Path, dataset: Path, bad: str, cause: str, message: str
) -> None:
    rm = write_rm(tmp_path, bad=bad)
    code, output, run_dir = judge(tmp_path, dataset, "-p", f"py:{rm}:Logged", "--batch-size", "1")
    assert code == 1, output  # nothing succeeded: the run fails, with the cause
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if cause in line]
    assert len(lines) == 1, output
    assert f"×{len(USERS) * TEST_ROWS}" in lines[0]
    # The file, the method and the first item it concerns.
    assert f"{rm}:Logged: {message} u1-test-1 (user u1)" in lines[0]
    assert "had no successful judgment" in output
    assert run_dir is not None
    statuses = set(frame(run_dir)["status"])
    assert statuses == {"api_error" if bad == "raise" else "parse_error"}
    clear_log(rm)
    judge(tmp_path, dataset, "-p", f"py:{rm}:Logged")
    assert any(e["method"] == "score" for e in read_log(rm)), "a failure was cached"


def test_a_bad_value_fails_only_its_own_pair(tmp_path: Path, dataset: Path) -> None:
    rm = write_rm(tmp_path, bad="nan:u3-test-2")
    # Under `any` the run directory keeps the message (a guarded policy keeps its cause only).
    code, output, run_dir = judge(tmp_path, dataset, "-p", f"py:{rm}:Logged", "--personal-data", "any")
    assert code == 0, output
    assert run_dir is not None
    failed = frame(run_dir).filter(pl.col("status") != "ok")
    assert failed["pair_id"].to_list() == ["u3-test-2"]
    assert "score returned nan for pair u3-test-2 (user u3)" in failed["error"][0]


def test_an_exception_fails_only_the_item_that_raises_it(tmp_path: Path, dataset: Path) -> None:
    """The batch is split until the one input the model cannot take is found; its neighbours are scored."""
    rm = tmp_path / "picky.py"
    rm.write_text(
        "class Picky:\n"
        "    def score(self, items):\n"
        "        if any(i.pair_id == 'u2-test-1' for i in items):\n"
        "            raise RuntimeError('cannot take this one')\n"
        "        return [len(i.response) for i in items]\n"
    )
    code, output, run_dir = judge(
        tmp_path, dataset, "-p", f"py:{rm}:Picky", "--batch-size", "64", "--personal-data", "any"
    )
    assert code == 0, output
    assert run_dir is not None
    failed = frame(run_dir).filter(pl.col("status") != "ok")
    assert failed["pair_id"].to_list() == ["u2-test-1"]
    assert (
        failed["error"][0]
        == f"{rm}:Picky: score raised RuntimeError: cannot take this one on pair u2-test-1 (user u2)"
    )


def test_a_failing_fit_user_fails_that_users_pairs_only(tmp_path: Path, dataset: Path) -> None:
    rm = tmp_path / "fussy.py"
    rm.write_text(
        "class Fussy:\n"
        "    def fit_user(self, user_id, history):\n"
        "        if user_id == 'u4':\n"
        "            raise KeyError(user_id)\n"
        "    def score(self, items):\n"
        "        return [len(i.response) for i in items]\n"
    )
    code, output, run_dir = judge(tmp_path, dataset, "-p", f"py:{rm}:Fussy", "--personal-data", "any")
    assert code == 0, output
    assert run_dir is not None
    failed = frame(run_dir).filter(pl.col("status") != "ok")
    assert failed["pair_id"].to_list() == ["u4-test-1", "u4-test-2"]
    assert set(failed["error"]) == {f"{rm}:Fussy: fit_user raised KeyError: 'u4' (user u4, 4 history rows)"}


# --- loading ------------------------------------------------------------------------------------------------


def _loading_error(tmp_path: Path, dataset: Path, spec: str) -> str:
    code, output, _ = judge(tmp_path, dataset, "-p", spec)
    assert code == 2, output
    assert "Traceback" not in output
    (line,) = [line for line in output.splitlines() if line.strip()]
    return line


def test_loading_errors_are_one_line_with_what_was_probably_meant(tmp_path: Path, dataset: Path) -> None:
    rm = write_rm(tmp_path, name="user_head.py")
    (tmp_path / "broken.py").write_text("class A:\n    def score(self, items)\n        return []\n")
    (tmp_path / "imports.py").write_text("import no_such_module_here\n")
    (tmp_path / "odd.py").write_text(
        "THRESHOLD = 3\n"
        "class NoScore:\n    pass\n"
        "class Raises:\n    def __init__(self):\n        raise OSError('weights not found')\n"
        "    def score(self, items):\n        return []\n"
    )
    cases = {
        f"py:{tmp_path}/user_haed.py:Logged": "no such file",
        f"py:{rm}:Loged": "user_head.py has no 'Loged'; did you mean 'Logged'?",
        f"py:{tmp_path}/broken.py:A": "broken.py line 2: SyntaxError",
        f"py:{tmp_path}/imports.py:A": "ModuleNotFoundError: No module named 'no_such_module_here' (imports.py line 1)",
        f"py:{tmp_path}/odd.py:THRESHOLD": "'THRESHOLD' in odd.py is an int, not a class or a factory",
        f"py:{tmp_path}/odd.py:NoScore": "NoScore() gave a NoScore that has no score(items) method",
        f"py:{tmp_path}/odd.py:Raises": "Raises() raised OSError: weights not found (odd.py line 6)",
        "py:no_such_package.rms:Head": "no module named 'no_such_package.rms'",
        f"py:{rm}": "expected py:FILE.py:NAME or py:package.module:NAME",
    }
    for spec, expected in cases.items():
        line = _loading_error(tmp_path, dataset, spec)
        assert expected in line, (spec, line)
        assert line.startswith(f"error: -p {spec}:"), line
    assert "did you mean 'user_head.py'?" in _loading_error(
        tmp_path, dataset, f"py:{tmp_path}/user_haed.py:Logged"
    )


def test_a_module_on_the_path_is_a_reward_model_too(tmp_path: Path, dataset: Path, monkeypatch: Any) -> None:
    package = tmp_path / "my_rms"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write_rm(package, name="logged.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, output, run_dir = judge(tmp_path, dataset, "-p", "py:my_rms.logged:Logged")
    assert code == 0, output
    assert run_dir is not None
    assert set(frame(run_dir)["status"]) == {"ok"}
    assert read_log(package / "logged.py")


def test_an_installed_reward_model_is_found_by_its_entry_point_name(tmp_path: Path, dataset: Path) -> None:
    """A real distribution on the path (its .dist-info with entry_points.txt), read by importlib.metadata in a
    fresh `prbj` process, as after `pip install`."""
    site = tmp_path / "site"
    (site / "acme_rm").mkdir(parents=True)
    (site / "acme_rm" / "__init__.py").write_text("")
    write_rm(site / "acme_rm", name="model.py")
    info = site / "acme_rm-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-rm\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[prbj.judges]\nacme-head = acme_rm.model:Logged\n")
    env = {"PYTHONPATH": f"{site}:{ROOT}", "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    base = [sys.executable, "-m", "prbj", "judge", "--no-progress", "--dataset", str(dataset)]
    base += ["--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "runs")]
    done = subprocess.run([*base, "-p", "acme-head"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "acme-head profile" in done.stdout
    assert read_log(site / "acme_rm" / "model.py")
    (run_dir,) = (tmp_path / "runs").iterdir()
    (described,) = json.loads((run_dir / "run.json").read_text())["judges"]
    assert described["distribution"] == "acme-rm==0.3" and described["source"] == "entry-point"
    typo = subprocess.run([*base, "-p", "acme-haed"], capture_output=True, text=True, env=env, timeout=300)
    assert typo.returncode == 2
    assert "did you mean 'acme-head'?" in typo.stderr + typo.stdout


# --- contexts ------------------------------------------------------------------------------------------------


def _items(rm: Path) -> list[dict[str, Any]]:
    return [item for entry in read_log(rm) if entry["method"] == "score" for item in entry["items"]]


def test_the_none_context_shows_no_persona_and_no_history(tmp_path: Path, dataset: Path) -> None:
    rm = write_rm(tmp_path)
    code, output, _ = judge(
        tmp_path, dataset, "-p", f"py:{rm}:Logged", "--context", "none", "--personal-data", "any"
    )
    assert code == 0, output
    items = _items(rm)
    assert items and all(i["persona"] is None and i["history"] == [] for i in items)
    assert all(f["history"] == [] for f in read_log(rm) if f["method"] == "fit_user")
    # The question as the judges see it (a conversation rendered turn by turn), and the user's groups.
    assert items[0]["prompt"].startswith("User: TESTu") and "Assistant: What camera" in items[0]["prompt"]
    assert {i["groups"]["age"] for i in items} == {"18-34", "35+"}


def test_each_context_has_its_own_model_instance(tmp_path: Path, dataset: Path) -> None:
    rm = write_rm(tmp_path)
    code, output, _ = judge(
        tmp_path, dataset, "-p", f"py:{rm}:Logged", "--context", "none", "--context", "profile"
    )
    assert code == 0, output
    fits = [f for f in read_log(rm) if f["method"] == "fit_user"]
    # Each user fitted once per context: empty in `none`, their rows in `profile`.
    assert sorted((f["user"], len(f["history"])) for f in fits) == sorted(
        [(u, 0) for u in USERS] + [(u, HISTORY_ROWS) for u in USERS]
    )


def test_on_personalized_rewardbench_the_persona_holds_the_ranked_posts(tmp_path: Path) -> None:
    rm = write_rm(tmp_path)
    code, output, _ = judge(tmp_path, Path("sample"), "-p", f"py:{rm}:Logged", "--limit", "2")
    assert code == 0, output
    items = _items(rm)
    assert len(items) == 12
    for item in items:
        assert item["history"] == [] and item["user"] == item["pair"]
        lines = item["persona"].splitlines()
        assert 1 <= len(lines) <= 10 and all(line.startswith("- [") for line in lines)
        assert "SECRET" not in item["persona"]


def test_the_oracle_context_shows_the_rubric_only_when_asked_by_name(tmp_path: Path) -> None:
    rm = write_rm(tmp_path)
    code, output, _ = judge(tmp_path, Path("sample"), "-p", f"py:{rm}:Logged", "--limit", "1")
    assert code == 0, output
    shown = " ".join(i["persona"] for i in _items(rm))
    clear_log(rm)
    code, output, _ = judge(
        tmp_path, Path("sample"), "-p", f"py:{rm}:Logged", "--limit", "1", "--context", "oracle"
    )
    assert code == 0, output
    oracle = [i["persona"] for i in _items(rm)]
    assert all(p.startswith("- ") for p in oracle)
    assert not set(oracle) & set(shown.split("\n"))


def test_swapped_profile_shows_another_users_history(tmp_path: Path, dataset: Path) -> None:
    rm = write_rm(tmp_path)
    code, output, _ = judge(tmp_path, dataset, "-p", f"py:{rm}:Logged", "--context", "swapped-profile")
    assert code == 0, output
    for item in _items(rm):
        assert item["history"] and item["history"][0].split(":")[0] != item["user"]


# --- prefer ---------------------------------------------------------------------------------------------------


def test_prefer_is_asked_in_the_order_drawn_and_in_both_orders(tmp_path: Path, dataset: Path) -> None:
    rm = tmp_path / "first.py"
    rm.write_text(FIRST_RM)
    code, output, run_dir = judge(tmp_path, dataset, "-p", f"py:{rm}:First")
    assert code == 0, output
    assert run_dir is not None
    judgments = frame(run_dir)
    asked = [e for e in read_log(rm) if e["method"] == "prefer"]
    assert len(asked) == len(judgments)
    records = {r["id"]: r for r in user_records(USERS) if r["split"] == "test"}
    for row in judgments.iter_rows(named=True):
        # Always the first answer: right exactly when the chosen one was shown first.
        assert row["verdict"] == ("chosen" if row["chosen_position"] == "A" else "rejected")
        first = next(e["first"] for e in asked if e["pair"] == row["pair_id"])
        chosen = records[row["pair_id"]]["chosen"]["content"]
        assert (first == chosen) == (row["chosen_position"] == "A")
    assert set(judgments["chosen_position"]) == {"A", "B"}
    clear_log(rm)
    code, output, run_dir = judge(tmp_path, dataset, "-p", f"py:{rm}:First", "--order", "both")
    assert code == 0, output
    assert run_dir is not None
    judgments = frame(run_dir)
    assert set(judgments["verdict"]) == {"inconsistent"}
    assert set(judgments["verdict_chosen_a"]) == {"chosen"} and set(judgments["verdict_chosen_b"]) == {
        "rejected"
    }
    # Each order is an item of its own in the cache: only the order the first run did not show is asked now.
    assert len(read_log(rm)) == len(judgments)
    assert {(e["pair"], e["first"]) for e in read_log(rm)}.isdisjoint(
        {(e["pair"], e["first"]) for e in asked}
    )
    # --mode pointwise asks score() instead.
    code, output, run_dir = judge(tmp_path, dataset, "-p", f"py:{rm}:First", "--mode", "pointwise")
    assert run_dir is not None
    assert set(frame(run_dir)["verdict"]) == {"tie"}


def test_a_dry_run_runs_no_reward_model(tmp_path: Path, dataset: Path) -> None:
    """`--dry-run` sends nothing and runs nothing costly: the model is loaded (a broken one fails before any
    pair) but neither fitted nor asked (a py: model may call an API of its own), nothing is cached, and the plan
    names it among the judges that cost nothing."""
    rm = write_rm(tmp_path)
    code, output, run_dir = judge(tmp_path, dataset, "-p", f"py:{rm}:Logged", "-p", "length", "--dry-run")
    assert code == 0, output
    assert run_dir is None and read_log(rm) == []
    assert f"offline judges and models run here: 0 calls, $0 (length, py:{rm}:Logged)" in output
    code, output, _ = judge(tmp_path, dataset, "-p", f"py:{rm}:Logged")
    assert code == 0, output
    assert any(entry["method"] == "score" for entry in read_log(rm))  # nothing was cached by the dry run


UNDECIDED_RM = """
import math


class Undecided:
    version = "1"

    def score(self, items):
        return [0.0 for _ in items]

    def prefer(self, items):
        # A tie when the chosen-looking answer comes first; no number at all for the other order.
        return [0.5 if item.first.startswith("CHOSEN") else math.nan for item in items]
"""


def test_prefer_reads_and_combines_its_orders_as_every_pairwise_judge(tmp_path: Path) -> None:
    """A `prefer` of exactly 1/2 is a tie in that order, and an order that failed leaves the other's pick kept (as
    for LLM judges, prbj.judges.orders.combine_reads); on PersonalRewardBench (a unit of judgments, prbj's rules:
    a tie wrong, a failure left out) the headline counts the tied orders as wrong, the failed ones not at all."""
    records = [
        {"user_id": user, "prompt": f"q{user}{n}", "chosen": f"CHOSEN {user}{n}", "rejected": f"other {user}{n}",
         "split": "test"}
        for user in ("u1", "u2") for n in (1, 2)
    ]  # fmt: skip
    data = write_jsonl(tmp_path / "ties.jsonl", records)
    rm = tmp_path / "undecided.py"
    rm.write_text(UNDECIDED_RM)
    code, output, run_dir = judge(
        tmp_path,
        data,
        "-p",
        f"py:{rm}:Undecided",
        "--benchmark",
        "personal-reward-bench",
        "--context",
        "none",
    )
    assert code == 1, output  # every judgment failed in one order
    assert run_dir is not None
    judgments = frame(run_dir)
    assert set(judgments["status"]) == {"parse_error"}
    assert set(judgments["verdict_chosen_a"]) == {"tie"} and judgments["verdict_chosen_b"].null_count() == 4
    (error,) = set(judgments["error"])
    assert error.count("prefer") == 1  # the failed order's one line, not once per order
    summary = json.loads((run_dir / "summary.json").read_text())
    overall = next(r for r in summary["results"] if r["subset"] == "all")
    assert summary["headline"]["unit"] == "judgments"
    assert overall["headline"] == 0.0


# --- the interface and the cache underneath ------------------------------------------------------------------


def test_the_types_are_exported_from_prbj_without_making_it_heavy() -> None:
    probe = (
        "import sys, prbj; light = 'prbj.local' not in sys.modules; "
        "from prbj import ScoreItem, PairItem, HistoryItem, RewardModel; "
        "item = ScoreItem('u', 'p', 'q', 'r'); "
        "print(light, item.persona, dict(item.groups), list(item.history), HistoryItem.__name__)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split() == ["True", "None", "{}", "[]", "Preference"]


def scored_items(rm: Path) -> int:
    return sum(len(entry["items"]) for entry in read_log(rm) if entry["method"] == "score")


def open_judge(tmp_path: Path, rm: Path) -> tuple[Any, Any]:
    """A gateway on tmp_path's cache folder and the model's judge, as a run opens them (in this process)."""
    from prbj.judges.python_rm import make_python_judges
    from prbj.judges.setup import JudgeOptions
    from prbj.llm.cache import ResponseCache
    from prbj.llm.gateway import Gateway

    gateway = Gateway(ResponseCache(tmp_path / "cache"))
    (judge,) = make_python_judges(f"py:{rm}:Logged", JudgeOptions(mode="pointwise"), gateway, None)
    return gateway, judge


def test_only_the_items_the_cache_lacks_reach_the_model_whatever_they_come_with(
    tmp_path: Path, dataset: Path
) -> None:
    """Each item is its own entry: answers scored before, in another request, in this process (not yet committed)
    or an earlier one, are not scored again; a batch mixes requests answered whole from the cache with one that
    needs the model for one item."""
    import asyncio

    from prbj.data.loaders import load_dataset

    rm = write_rm(tmp_path)
    view = load_dataset(str(dataset)).pairs[0].view("profile")

    async def both(judge: Any, first: list[str], second: list[str]) -> list[list[float]]:
        return list(await asyncio.gather(judge.score(view, first), judge.score(view, second)))

    gateway, judge = open_judge(tmp_path, rm)
    try:
        assert asyncio.run(judge.score(view, ["a", "b"])) == [expected_score(view.pair_id, t) for t in "ab"]
        assert scored_items(rm) == 2
        # At once, before the cache's writer has committed "a" and "b": only "c" is new.
        assert asyncio.run(judge.score(view, ["c", "a"])) == [expected_score(view.pair_id, t) for t in "ca"]
        assert scored_items(rm) == 3
    finally:
        gateway.close()
    clear_log(rm)
    gateway, judge = open_judge(tmp_path, rm)  # a new run: what it knows is on disk
    try:
        found = asyncio.run(both(judge, ["b", "c"], ["a", "d", "b"]))
        assert judge.runtime.batcher.batches_run == 1  # the one with "d"
    finally:
        gateway.close()
    assert found == [
        [expected_score(view.pair_id, t) for t in texts] for texts in (["b", "c"], ["a", "d", "b"])
    ]
    assert scored_items(rm) == 1  # "d"
    gateway, judge = open_judge(tmp_path, rm)
    try:
        asyncio.run(both(judge, ["d", "c"], ["a"]))
        # Answered whole on the event loop: no batch went to the model's thread.
        assert judge.runtime.batcher.batches_run == 0
    finally:
        gateway.close()
    assert scored_items(rm) == 1


def test_a_model_the_cache_holds_nothing_of_is_looked_up_only_once_it_must_be(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed model's first run asks the disk for nothing while what it stored is remembered in memory; once
    that is forgotten (a long run), or on the next run, its items are looked up, and found."""
    import asyncio

    from prbj.data.loaders import load_dataset
    from prbj.llm.cache import ResponseCache
    from prbj.local import rm_runtime

    lookups: list[int] = []
    real_lookup = ResponseCache.get_scores

    def get_scores(cache: ResponseCache, keys: Any) -> dict[bytes, float]:
        lookups.append(len(keys))
        return real_lookup(cache, keys)

    monkeypatch.setattr(ResponseCache, "get_scores", get_scores)
    monkeypatch.setattr(rm_runtime, "RECENT_ITEMS", 3)
    rm = write_rm(tmp_path)
    view = load_dataset(str(dataset)).pairs[0].view("profile")
    gateway, judge = open_judge(tmp_path, rm)
    try:
        asyncio.run(judge.score(view, ["a", "b"]))
        asyncio.run(judge.score(view, ["c", "d"]))  # more than memory holds: "a" and "b" are forgotten
        assert lookups == [] and scored_items(rm) == 4
        # ... and found on disk (committed before they were forgotten), not scored again.
        assert asyncio.run(judge.score(view, ["a", "b"])) == [expected_score(view.pair_id, t) for t in "ab"]
        assert lookups == [2] and scored_items(rm) == 4
    finally:
        gateway.close()
    gateway, judge = open_judge(tmp_path, rm)
    try:
        asyncio.run(judge.score(view, ["d", "e"]))
    finally:
        gateway.close()
    assert lookups == [2, 2] and scored_items(rm) == 5


# --- serving ----------------------------------------------------------------------------------------------


def test_prbj_serve_serves_a_python_reward_model(tmp_path: Path) -> None:
    """`prbj serve -p py:…` in its own process: served scores are the model's, batched, cached, and a failure
    reaches the trainer as an error, never as a score."""
    import urllib.request

    from test_serve import _Server

    rm = write_rm(tmp_path)

    def post(url: str, body: Any) -> tuple[int, Any]:
        request = urllib.request.Request(
            url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    server = _Server("-p", f"py:{rm}:Logged", "--cache-dir", str(tmp_path / "cache"))
    try:
        items = [
            {
                "pair_id": "p1",
                "query": "Which lens?",
                "response_text": text,
                "profile": ["I shoot portraits."],
            }
            for text in ("a bright prime", "a long zoom", "a macro lens")
        ]
        status, body = post(f"{server.url}/score/batch", {"items": items})
        assert status == 200, body
        assert body["scores"] == pytest.approx([expected_score("p1", i["response_text"]) for i in items])
        status, body = post(f"{server.url}/score", items[0])
        assert status == 200 and body["score"] == pytest.approx(expected_score("p1", "a bright prime"))
    finally:
        server.stop()
    scored = [item for e in read_log(rm) if e["method"] == "score" for item in e["items"]]
    assert len(scored) == 3  # the single request was answered from the cache: each answer is its own entry
    assert {i["user"] for i in scored} == {"p1"} and scored[0]["persona"] == "- [post] I shoot portraits."
    write_rm(tmp_path, bad="nan", version="2")
    server = _Server("-p", f"py:{rm}:Logged", "--cache-dir", str(tmp_path / "cache"))
    try:
        status, body = post(f"{server.url}/score", items[0])
    finally:
        server.stop()
    assert status == 500 and "score returned nan for pair p1 (user p1)" in body["error"]


# --- where the model's calls run -------------------------------------------------------------------------------


@pytest.mark.parametrize("inline_below", [0.0, math.inf], ids=["worker-thread", "event-loop"])
def test_a_fast_model_runs_on_the_event_loop_with_the_same_results(
    tmp_path: Path, dataset: Path, inline_below: float
) -> None:
    """A model whose calls are quicker than `inline_below` seconds runs on the event loop (two thread switches
    per batch cost more than it); the first batch always goes to the worker thread, which measures it."""
    import asyncio

    from prbj.data.loaders import load_dataset
    from prbj.judges.python_rm import make_python_judges
    from prbj.judges.setup import JudgeOptions
    from prbj.llm.cache import ResponseCache
    from prbj.llm.gateway import Gateway
    from prbj.runs.execute import judge_dataset

    rm = write_rm(tmp_path)
    data = load_dataset(str(dataset))
    gateway = Gateway(ResponseCache(tmp_path / "cache"))
    (judge,) = make_python_judges(
        f"py:{rm}:Logged", JudgeOptions(batch_size=2, mode="pointwise"), gateway, None
    )
    judge.runtime.inline_below = inline_below
    judge.pairs_in_flight = 1  # one pair per batch: several batches
    try:
        judgments = asyncio.run(judge_dataset(data, [judge], concurrency=1, show_progress=False))
    finally:
        gateway.close()
    threads = [e["thread"] for e in read_log(rm) if e["method"] == "score"]
    assert len(threads) == len(data.pairs)
    assert threads[0].startswith("prbj-py:")
    expected = "MainThread" if inline_below else threads[0]
    assert set(threads[1:]) == {expected}
    for judgment, pair in zip(judgments, data.pairs, strict=True):
        assert judgment.status == "ok"
        assert judgment.score_chosen == pytest.approx(expected_score(pair.id, pair.chosen))


def test_the_planner_context_shows_the_planners_aspects_as_the_persona(
    tmp_path: Path, openai_profiles: Path
) -> None:
    """Every context beyond none and the profile ones is rendered as the LLM judges see it: here the aspects a
    --planner (the loopback provider) inferred; a planner reply without aspects fails that pair alone."""
    from loopback import ChatRequest, ProviderServer

    aspects = "- keeps costs low\n- prefers hands-on advice"
    replies = {"text": aspects}

    def reply(request: ChatRequest) -> str:
        return replies["text"]

    rm = write_rm(tmp_path)
    args = ["-p", f"py:{rm}:Logged", "--context", "planner", "--planner", "planner", "--subset", "art"]
    args += ["--providers-dir", str(openai_profiles), "--limit", "2"]
    with ProviderServer(reply=reply) as server:
        code, output, run_dir = judge(tmp_path, Path("sample"), *args, "--api-base", f"{server.url}/v1")
        assert code == 0, output
        assert run_dir is not None
        items = _items(rm)
        assert len(items) == 4 and {i["persona"] for i in items} == {aspects}
        assert all(i["history"] == [] for i in items)
        assert set(frame(run_dir)["status"]) == {"ok"}
        replies["text"] = "I cannot tell."
        code, output, run_dir = judge(
            tmp_path, Path("sample"), *args, "--api-base", f"{server.url}/v1", cache="other"
        )
    assert code == 1, output
    assert run_dir is not None
    assert set(frame(run_dir)["status"]) == {"planner_error"}


# --- best-of-k items ----------------------------------------------------------------------------------------


def test_a_best_of_k_item_is_decided_by_the_argmax_of_every_candidates_score(tmp_path: Path) -> None:
    """Every candidate is scored, not only the preferred one and the first other: the preferred answer is longer
    than the first other but shorter than the third, so the length model is wrong on that item, as the built-in
    `length` judge is; the item the preferred answer is longest in is right. Even with `prefer` (two answers at
    a time) the item is decided by `score`."""
    item = {"user_id": "u1", "prompt": "q", "split": "test"}
    rows = [
        {**item, "id": "u1-1", "responses": ["a b c", "a b", "a", "a b c d e"], "preferred": 0},
        {**item, "id": "u1-2", "responses": ["a b c d e f", "a b", "a", "a b c d e"], "preferred": 0},
        {"user_id": "u1", "id": "u1-0", "prompt": "p", "split": "train", "chosen": "x", "rejected": "y"},
    ]
    dataset = write_jsonl(tmp_path / "k.jsonl", rows)
    rm = tmp_path / "longest.py"
    rm.write_text(
        "class Longest:\n"
        "    def score(self, items):\n"
        "        return [float(len(i.response.split())) for i in items]\n"
        "    def prefer(self, items):\n"
        "        raise AssertionError('prefer asked about a best-of-k item')\n"
    )
    code, output, run_dir = judge(tmp_path, dataset, "-p", f"py:{rm}:Longest", "-p", "length")
    assert code == 0, output
    assert run_dir is not None
    rows_by_judge = frame(run_dir)
    mine = rows_by_judge.filter(pl.col("judge") == f"py:{rm}:Longest")
    assert dict(zip(mine["pair_id"], mine["verdict"], strict=True)) == {"u1-1": "rejected", "u1-2": "chosen"}
    assert mine["score_rejected"].to_list() == [5.0, 5.0]  # the best of the others, not the first other
    builtin = rows_by_judge.filter(pl.col("judge") == "length")
    assert builtin["verdict"].to_list() == mine["verdict"].to_list()
