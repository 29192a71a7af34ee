"""Run directories for the viewer's tests, made by the tests themselves: the offline judges on the bundled
sample (a real `prbj judge`), and a small run of LLM-like judgments (replies quoting the answers, both orders,
a failure with its cause, a confidence) on a dataset whose texts hold HTML, with the dataset's real fingerprint,
so that the viewer reads its questions and answers back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from conftest import SUBSET_NAMES, make_record, write_jsonl
from prbj.cli import main
from prbj.data.loaders import load_dataset
from prbj.judges.verdict import REPLY_SEPARATOR
from run_dirs import judgment, write_run_dir

SCRIPT = "<script>window.pwned = 1</script>"


def sample_run(out: Path) -> Path:
    result = CliRunner().invoke(main, ["judge", "--no-progress", "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def html_dataset(path: Path) -> Path:
    records = []
    for i in range(1, 7):
        record = make_record(i, SUBSET_NAMES[(i - 1) // 2])
        if i == 1:
            record["profile"][0]["text"] = f"My post {SCRIPT} about <b>film</b> cameras."
            record["chosen"] = f"Use a rangefinder. {SCRIPT} <img src=x onerror=alert(1)>"
        records.append(record)
    return write_jsonl(path, records)


def _reply(chosen_first: bool, letter: str) -> str:
    quoted = (
        "A used manual rangefinder is cheap" if chosen_first else "A new mirrorless camera with a fast prime"
    )
    return f"<think>Which fits?</think>\n> {quoted}\nThe first answer fits.\nResult: {letter}"


def llm_rows() -> list[dict[str, Any]]:
    rows = []
    for i in range(1, 7):
        pair_id, subset = f"t-{i:03d}", SUBSET_NAMES[(i - 1) // 2]
        both = _reply(True, "A") + REPLY_SEPARATOR + _reply(False, "A" if i % 2 else "B")
        inconsistent = i % 2 == 1
        rows.append(
            judgment(
                pair_id,
                subset,
                "judge-x",
                context="profile",
                correct=not inconsistent,
                position="both",
                reply=both,
                prompt_tokens=900,
                completion_tokens=40,
                cost_usd=0.001,
                latency_s=1.5,
                context_block="Past posts of this user:\n- I shoot film",
                p_chosen=0.8,
            )
            | ({"verdict": "inconsistent"} if inconsistent else {})
        )
        status = "api_error" if i == 6 else "ok"
        rows.append(
            judgment(
                pair_id,
                subset,
                "judge-y",
                context="none",
                correct=i <= 3,
                status=status,
                position="A" if i % 2 else "B",
                reply=None if status != "ok" else _reply(i % 2 == 1, "A"),
                error="429 Too Many Requests" if status != "ok" else None,
                cause="rate_limited" if status != "ok" else None,
            )
        )
    return rows


def llm_run(folder: Path) -> Path:
    """The LLM-like run on html_dataset, recording the dataset's true fingerprint."""
    dataset = html_dataset(folder / "pairs.jsonl")
    fingerprint = load_dataset(str(dataset)).fingerprint()
    return write_run_dir(folder / "run-llm", llm_rows(), source=str(dataset), fingerprint=fingerprint)
