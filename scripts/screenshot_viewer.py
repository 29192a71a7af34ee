"""Screenshots of each page of `prbj view`, for docs/viewer.md (docs/viewer-*.png).

    python scripts/screenshot_viewer.py [--out docs]

Makes a run in a temporary folder with the offline judges and an LLM judge (`--order both`, profile context)
answered by the test suite's loopback provider on 127.0.0.1 (a scripted judge that reasons, quotes an answer and
ends with a verdict), so nothing leaves the machine, and a small build with blind annotation sheets; serves both
with the real viewer and photographs the Runs, Run, Judgments and Pair pages and a sheet's item in headless
Debian Chromium (tests/browser.py, as the browser tests drive it).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser import chromium, serving  # noqa: E402
from loopback import ChatRequest, ProviderServer  # noqa: E402

_ANSWER = re.compile(r"## Answer ([AB])\n(.*?)(?=\n\n## Answer|\n\nWhich answer)", re.S)


def scripted_judge(request: ChatRequest) -> str:
    """Prefer the answer sharing more words with the user's posts; quote its first sentence."""
    prompt = request.last_user
    answers = dict((slot, text.strip()) for slot, text in _ANSWER.findall(prompt))
    context = prompt.split("## Question from the user")[0].lower()
    overlap = {
        slot: sum(word in context for word in set(text.lower().split())) for slot, text in answers.items()
    }
    pick = max(sorted(overlap), key=lambda slot: overlap[slot])
    quoted = answers.get(pick, "").split(". ")[0]
    return (
        "<think>The posts show what this user cares about; compare both answers with them.</think>\n"
        f"Answer {pick} speaks to this user's own situation:\n> {quoted}\n"
        f"The other answer is sound but generic.\nResult: {pick}"
    )


def make_run(tmp: Path) -> Path:
    from click.testing import CliRunner

    from prbj.cli import main

    with ProviderServer(reply=scripted_judge) as provider:
        args = [
            "judge",
            "--no-progress",
            "--out",
            str(tmp / "reports"),
            "--cache-dir",
            str(tmp / "cache"),
            "-p",
            "random",
            "-p",
            "length",
            "-p",
            "bm25-profile",
            "-p",
            "litellm:openai/scripted-judge",
            "--api-base",
            provider.url,
            "--order",
            "both",
        ]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(result.output)
    (run_dir,) = (tmp / "reports").iterdir()
    return run_dir


def make_build(tmp: Path) -> Path:
    """A build folder with two blind annotation sheets (the test suite's hand-made build)."""
    from click.testing import CliRunner
    from test_build_annotation import make_build_dir

    from prbj.cli import main

    build = make_build_dir(tmp)
    result = CliRunner().invoke(
        main, ["build", "annotate", str(build), "--sample", "3"], catch_exceptions=False
    )
    if result.exit_code != 0:
        raise SystemExit(result.output)
    return build


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory() as folder:
        run_dir = make_run(Path(folder))
        key = run_dir.name
        from urllib.parse import quote

        import polars as pl

        judgments = pl.read_parquet(run_dir / "judgments.parquet")
        judge = next(name for name in judgments["judge"].unique().sort() if "scripted" in name)
        mine = judgments.filter(pl.col("judge") == judge).sort("pair_id")
        wrong = mine.filter(~pl.col("correct"))
        pair = (wrong if wrong.height else mine)["pair_id"][0]
        selection = f"judge={quote(judge, safe='')}&context=profile"
        shots = {
            "viewer-runs.png": ("/", 900),
            "viewer-run.png": (f"/run/{key}", 1400),
            "viewer-judgments.png": (f"/run/{key}/judgments?{selection}&outcome=wrong", 1000),
            "viewer-pair.png": (f"/run/{key}/pair/{pair}?{selection}", 1900),
        }
        build = make_build(Path(folder))
        shots["viewer-sheet.png"] = (f"/build/{build.name}/sheet/sheet-1/1", 1250)
        with serving([run_dir, build], reviewer="alice") as (url, viewer), chromium() as browser:
            viewer.warm()
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            for name, (path, height) in shots.items():
                page.set_viewport_size({"width": 1280, "height": height})
                page.goto(url + path)
                page.screenshot(path=str(args.out / name))
                print(f"wrote {args.out / name}")


if __name__ == "__main__":
    main()
