"""Every documented shell example runs as written (issue 26): README.md, docs/*.md, examples/*.md, every
command's `--help` and the `run:` steps of examples/github-actions-judge-gate.yml (collected by
tests/doc_examples.py, so a new example is picked up by itself).

They run in order, in a scratch folder laid out as a fresh clone (examples/, experiments/, reports/baselines/,
prbj/prompts/) with the files the docs tell the reader to have (a LaMP-QA file, an official BoN summary, a PPO
CSV, their own provider profile, the workflow's data/pairs.jsonl, ...). Examples that need a key run against the
loopback provider (tests/loopback.py, every provider's real wire format through the real LiteLLM stack),
reached the documented ways:

- PRBJ_PROVIDERS_DIR holds, for every bundled profile, a partial profile of the same name that `extends` it
  and sets `api_base` to the loopback server (as docs/providers.md "Profiles" describes) and limits the loopback
  server never reaches (a higher tier's); keys are set in the environment;
- `--api-base http://127.0.0.1:8000/v1` (the reader's own vLLM/SGLang server) points at the loopback server;
  the other port 8000 (`prbj serve --port 8000` and the clients calling it) is a free port of this machine.

`prbj` commands run in-process through click's CliRunner (one LiteLLM import for all), shell commands (curl,
export, `$(...)`) through bash. A long-running example (`prbj serve`, `prbj view`) is started as a process,
waited for until it prints its address, kept running for the rest of its block (the `curl` under it) or until
the next server starts, and stopped with Ctrl-C (SIGINT). A line `# → TEXT` under a command is output the docs
show: the command must print it (`...` stands for anything). A workflow job starts from a fresh checkout (the
restored cache kept) with only the variables the workflow sets: no API key where it names no secret.

Examples that cannot run here are listed in NOT_HERE with the reason; those that are prbj's own (a GPU, a hub
download, a cluster, the official repository) must end with one clear line on stderr and exit 2.
`PRBJ_EXAMPLES_TIMING=1 pytest -m examples -s` prints the slowest examples (the step has a time budget in CI);
`PRBJ_EXAMPLES_ONLY=REGEX` runs only the examples whose "file:line: command" matches (those that need an earlier
example's output then fail).
"""

from __future__ import annotations

import csv
import glob
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner
from doc_examples import ROOT, Example, all_examples
from loopback import ChatRequest, ProviderServer

from prbj.cli import main
from prbj.data.labels import Label
from prbj.llm.pacing import LIMIT_NAMES
from prbj.runs.rundir import append_label, read_labels

pytestmark = pytest.mark.examples

# Not run here, by what the command starts with or contains; `2` = prbj's own, must fail with one clear line.
NOT_HERE: dict[str, tuple[str, int | None]] = {
    "pip install": ("installs prbj: CI's own first step (.ci/run) runs it", None),
    "pytest": ("the test suite itself: CI runs it (.ci/run)", None),
    "apt-get ": ("installs a system package (Chromium): CI's own step", None),
    "ruff check": ("CI's static checks: their own step", None),
    "bash .ci/eee-env": ("CI's own step: the Python 3.12 venv of the readers tests", None),
    'wait "$!"': ("CI's own step: waits for that venv", None),
    "mypy": ("CI's static checks: their own step", None),
    "pylint": ("CI's static checks: their own step", None),
    "python bench/bench_replay.py": ("CI's own speed step: two minutes of timed processes (.ci/run)", None),
    "python -m spacy download": ("downloads a spaCy model; none can be downloaded here", None),
    "--dataset pairs.jsonl --personal-data pseudonymized": (
        "needs a spaCy NER model, which this machine cannot download: refused before anything is sent",
        2,
    ),
    "vllm serve": ("starts a GPU model server (vLLM); the loopback provider stands in for it here", None),
    "python -m verl.": ("verl PPO training on GPUs", None),
    "python -m openrlhf.": ("OpenRLHF PPO training on GPUs", None),
    "hf download": ("downloads from the Hugging Face hub; the workspace holds what it would write", None),
    "hf:QiyaoMa/": ("downloads the benchmark from the Hugging Face hub", 2),
    "hf:alireza7/": ("downloads LaMP-QA from the Hugging Face hub", 2),
    "hf:/models/": ("a reward model checkpoint on the reader's disk (GPU-sized)", 2),
    "hf-local:./SmolLM2": (
        "the SmolLM2 GGUF file the reader downloads (tests/test_local_hf.py runs it: -m slow)",
        2,
    ),
    "--ray ray://": ("a Ray cluster", 2),
    "prbj judge -p user-head ": (
        "a reward model the reader installs with pip (tests/test_plugins.py installs one from a real .dist-info)",
        2,
    ),
    "--official-repo ../Personalized-RewardBench": ("a clone of the official repository", 2),
}

# Examples whose outcome on the 60-pair sample is not the full benchmark's, with the exit code and the words they
# end with here: a calibration certifies a threshold only with enough judgments (docs/confidence.md's `prbj calibrate …
# --target-error 0.2 --delta 0.2` example certifies one on the sample, and must).
ON_THE_SAMPLE: dict[str, tuple[int, str]] = {
    "prbj calibrate reports/<run-id> --target-error 0.10 --delta 0.05": (1, "nothing written."),
    "prbj calibrate reports/<run-id> --split 0.5 --judge embed-profile": (1, "nothing written."),
}

# Placeholders the docs use, and what they stand for here (computed from the workspace when used).
PLACEHOLDERS = ("<run-id>", "<run-a>", "<run-b>", "<old-run>", "<new-run>", "<judge-run>", "<bon-run>",
                "<llm-run>", "RUN_DIR", "<judge>")  # fmt: skip


def reply(request: ChatRequest) -> str:
    """Every role a documented example asks a model to play."""
    import bon_script
    import lamp_fixture

    if any(
        mark in request.system for mark in (bon_script.POLICY_MARK, bon_script.GOLD_MARK, bon_script.RM_MARK)
    ):
        return bon_script.reply(request)
    if lamp_fixture.role_of(request) != "judge":
        return lamp_fixture.reply(request)
    text = request.prompt
    if "write a persona of that person" in request.system:  # the synthesizer of --context synthesized
        return "Choice 1: the practical reply.\nPersona: Someone who wants practical, concrete, affordable answers."
    if "infer what THIS user will expect" in text:
        return "- keeps costs low\n- prefers hands-on advice\n- wants concrete next steps"
    if "evaluator of an answer" in text:
        return "It fits the user.\nScore: 7"
    return "Answer A fits this user better.\nResult: A"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Workspace:
    root: Path
    server: ProviderServer
    env: dict[str, str]
    serve_port: int
    ran: list[str] = field(default_factory=list)

    # --- placeholders -------------------------------------------------------------------------------
    def value(self, placeholder: str, folder: str) -> str:
        """What a placeholder of the docs names, written after `folder` (`reports/<run-id>`, `runs/<run-id>`)."""
        where = self.root / folder
        if placeholder in ("<run-id>", "<judge-run>", "<run-a>", "<old-run>"):
            if folder == "reports/":
                return "documented"
            runs = sorted(p.name for p in where.iterdir() if (p / "summary.json").exists())
            assert runs, f"{folder}{placeholder}: no run in {folder} yet"
            return runs[-1]
        if placeholder in ("<run-b>", "<new-run>"):
            return "documented-again"
        if placeholder == "<llm-run>":
            return "documented-llm"
        if placeholder in ("<bon-run>", "RUN_DIR"):
            # The reader's BoN run: the one docs/bon.md walks through (sampled, scored, evaluated), the first made.
            runs = sorted((self.root / "reports" / "bon").glob("bon-*"), key=lambda p: p.stat().st_mtime)
            assert runs, "a BoN example needs a BoN run: none was made yet"
            return runs[0].name if placeholder == "<bon-run>" else f"reports/bon/{runs[0].name}"
        if placeholder == "<judge>":
            return "embed-profile"
        raise AssertionError(placeholder)

    def substitute(self, command: str) -> str:
        for placeholder in PLACEHOLDERS:
            pattern = rf"(?<![\w<])([\w./-]*/)?{re.escape(placeholder)}"
            command = re.sub(
                pattern,
                lambda m, name=placeholder: (m.group(1) or "") + self.value(name, m.group(1) or ""),
                command,
            )
        loopback = f"{self.server.url}/v1"
        command = command.replace("http://127.0.0.1:8000/v1", loopback).replace(
            "http://127.0.0.1:8001/v1", loopback
        )
        command = re.sub(r"(?<=[:\s])8000\b", str(self.serve_port), command)
        if " RUN" in command and "--run RUN" in command:
            command = command.replace("--run RUN", f"--run {self.batch_run()}")
        return command

    def batch_run(self) -> str:
        records = sorted((self.root / "cache" / "batches").glob("*.json"))
        assert records, "a batch example needs a batch run"
        return str(json.loads(records[-1].read_text())["run_id"])


def _clone_files(root: Path) -> None:
    """What a fresh clone holds beside the package, that the examples name."""
    for folder in ("examples", "experiments", "reports/baselines"):
        shutil.copytree(ROOT / folder, root / folder)
    shutil.copytree(
        ROOT / "prbj" / "prompts", root / "prbj" / "prompts", ignore=shutil.ignore_patterns("*.py")
    )


def _reader_files(root: Path, server_url: str) -> None:
    """Files the docs tell the reader to have: their own data, an official BoN summary, a PPO table, their own
    provider profile."""
    sample = (ROOT / "prbj" / "data" / "sample" / "Art_and_Entertainment.jsonl").read_text()
    (root / "pairs.jsonl").write_text(sample)
    # The dataset examples/github-actions-judge-gate.yml names (ADAPT): the reader's project keeps it in data/.
    (root / "data").mkdir()
    (root / "data" / "pairs.jsonl").write_text(sample)
    # docs/data.md's `hf download QiyaoMa/Personalized-RewardBench --local-dir prb`: the hub's layout, one
    # Parquet file per subset under <subset>/test-*.parquet (here holding the sample's pairs).
    import polars as pl

    for subset in sorted((ROOT / "prbj" / "data" / "sample").glob("*.jsonl")):
        (root / "prb" / subset.stem).mkdir(parents=True)
        pl.read_ndjson(subset).write_parquet(root / "prb" / subset.stem / "test-00000-of-00001.parquet")
    bon = root / "BoN" / "data"
    bon.mkdir(parents=True)
    (bon / "evaluation_summary.json").write_text(json.dumps({
        subset: {str(k): {"k": k, "num_examples": 20, "mean_score": 0.4 + 0.02 * k, "std_score": 0.1,
                          "min_score": 0.0, "max_score": 1.0} for k in (1, 2, 4)}
        for subset in ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture")
    }))  # fmt: skip
    rms = ("Skywork-Reward-V2-Llama-3.1-8B", "bm25-profile", "length", "embed-profile", "RM-A", "gemini-3.1-pro",
           "claude-sonnet-4-6")  # fmt: skip
    (root / "ppo_results.csv").write_text(
        "rm,subset,score\n" + "".join(f"{rm},all,{0.3 + 0.1 * i}\n" for i, rm in enumerate(rms))
    )
    for name in ("other_benchmarks.csv", "other.csv", "accuracies.csv"):
        (root / name).write_text(
            "benchmark,rm,accuracy\n"
            + "".join(f"RewardBench,{rm},{0.6 + 0.05 * i}\n" for i, rm in enumerate(rms))
        )
    own = root / "my-providers"
    own.mkdir()
    (own / "qwen2.5-0.5b.toml").write_text(
        f'model = "openai/Qwen/Qwen2.5-0.5B-Instruct"\napi_base = "{server_url}/v1"\npaid = false\n'
        "api_key_required = false\n[params]\ntemperature = 1.0\nmax_tokens = 512\n"
    )


def _provider_overrides(folder: Path, server_url: str) -> None:
    """Every bundled profile, sent to the loopback server: a partial profile of the same name that extends it,
    with the limits of an account that the loopback server never throttles (as a higher tier's own profile
    would state them): at Claude's Tier 1 (50 requests a minute) one judge run of the sample would take
    minutes of pacing."""
    folder.mkdir()
    for bundled in sorted((ROOT / "providers").glob("*.toml")):
        base = server_url + ("/v1" if bundled.stem == "openai-compatible" else "")
        limits = tomllib.loads(bundled.read_text(encoding="utf-8")).keys() & set(LIMIT_NAMES)
        raised = "".join(f"{name} = 1_000_000_000\n" for name in sorted(limits))
        (folder / bundled.name).write_text(f'extends = "{bundled.stem}"\napi_base = "{base}"\n{raised}')


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("clone")
    with ProviderServer(reply=reply) as server:
        _clone_files(root)
        _reader_files(root, server.url)
        _provider_overrides(root / "providers-here", server.url)
        env = {
            "PRBJ_PROVIDERS_DIR": str(root / "providers-here"),
            "PRBJ_CACHE_DIR": str(root / "cache"),
            "PRBJ_BATCH_POLL_SECONDS": "0.05",
            "GEMINI_API_KEY": "gem-docs-0123456789",
            "OPENAI_API_KEY": "sk-docs-0123456789",
            "ANTHROPIC_API_KEY": "ant-docs-0123456789",
            "HOME": str(root),
            "BROWSER": "true",  # `prbj view --open` opens "a browser": here a command that does nothing
            "COLUMNS": "100",
        }
        yield Workspace(root, server, env, free_port())


# --- running ------------------------------------------------------------------------------------------------


def _not_here(command: str) -> tuple[str, int | None] | None:
    return next((why for key, why in NOT_HERE.items() if key in command), None)


def _env_prefix(words: list[str]) -> tuple[dict[str, str], list[str]]:
    extra = {}
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        extra[name] = value
    return extra, words


def _expand_globs(words: list[str], root: Path, home: str) -> list[str]:
    """What the shell makes of `~` and of globs (relative to the workspace, or absolute as `"$gate_out"/*/`)."""
    expanded: list[str] = []
    for word in words:
        if word == "~" or word.startswith("~/"):
            word = home + word[1:]
        if any(c in word for c in "*?"):
            matches = sorted(glob.glob(word, root_dir=root))
            assert matches, f"{word}: matches nothing"
            expanded += matches
        else:
            expanded.append(word)
    return expanded


Env = dict[str, str | None]


def example_env(ws: Workspace, example: Example) -> Env:
    """The variables an example runs with: the workspace's; a CI workflow's step sees only what the workflow
    sets (a key only where a step names the repository secret)."""
    if example.env is None:
        return dict(ws.env)
    env: Env = {name: None if name.endswith("_API_KEY") else value for name, value in ws.env.items()}
    for name, value in example.env.items():
        env[name] = ws.env[value.removeprefix("secret:")] if value.startswith("secret:") else value
    return env


def _os_env(env: Env) -> dict[str, str]:
    return {name: value for name, value in {**os.environ, **env}.items() if value is not None}


def run_prbj(words: list[str], env: Env) -> tuple[int, str]:
    result = CliRunner(env=env).invoke(main, words[1:], catch_exceptions=False)
    return result.exit_code, result.output


def run_shell(ws: Workspace, command: str, env: Env) -> tuple[int, str]:
    done = subprocess.run(["bash", "-c", command], cwd=ws.root, env=_os_env(env), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    return done.returncode, done.stdout + done.stderr


@dataclass
class Background:
    process: subprocess.Popen[str]
    lines: list[str]

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        try:
            out, _ = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        self.lines += out.splitlines()
        return self.process.returncode


def start_server(ws: Workspace, words: list[str], env: Env) -> Background:
    """`prbj serve` / `prbj view` / `inspect view` (Inspect's log viewer, from the `inspect` extra): started as
    a process, returned once it prints where it listens."""
    if words[0] == "inspect":
        command = [shutil.which("inspect") or str(Path(sys.executable).with_name("inspect")), *words[1:]]
    else:
        command = [sys.executable, "-m", "prbj", *words[1:]]
    process = subprocess.Popen(command, cwd=ws.root, env={**_os_env(env), "PYTHONUNBUFFERED": "1"},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    lines: list[str] = []
    deadline = time.monotonic() + 120
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if "listening on" in line or "prbj view: http" in line or "Running on http" in line:
            return Background(process, lines)
    process.kill()
    raise AssertionError(f"{' '.join(words)}: never said where it listens:\n" + "\n".join(lines))


def fill_sheets(ws: Workspace, words: list[str]) -> None:
    """docs/build.md: "fill builds/b1/annotation/sheet-1.csv and sheet-2.csv (one annotator each)" before
    `prbj build agreement`: each annotator rates every row (seeded, so the agreement is the same every run)."""
    for index, name in enumerate(w for w in words if w.endswith(".csv")):
        path = ws.root / name
        with path.open(encoding="utf-8-sig", newline="") as handle:
            rows = list(csv.DictReader(handle))
        if not rows or rows[0]["preference"]:
            continue
        draw = random.Random(index)
        for row in rows:
            for column in row:
                if column[:2] in ("a_", "b_"):
                    row[column] = str(draw.randint(1, 5))
            row["preference"] = draw.choice(["A", "B", "tie"])
        with path.open("w", encoding="utf-8-sig", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


def _matches(expected: str, output: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in expected.split("..."))
    return re.search(pattern, output) is not None


def _one_line_error(code: int, output: str) -> bool:
    lines = [line for line in output.splitlines() if line.strip()]
    return code == 2 and len(lines) >= 1 and lines[-1].startswith("error: ")


def label_pairs(run_dir: Path) -> None:
    """`prbj build agreement RUN` reads the labels reviewers gave in `prbj view` (its error says "label pairs
    with `prbj view RUN` first"): two reviewers label a dozen pairs, each line as the viewer appends it."""
    if read_labels(run_dir):
        return
    draw = random.Random(7)
    for pair in range(1, 13):
        for reviewer in ("alice", "bob"):
            preference = draw.choice(["chosen", "chosen", "rejected", "cant_tell"])
            shown = draw.choice(["chosen", "rejected"])
            label = Label(f"ae-{pair:03d}", preference, reviewer, "2026-01-01T12:00:00Z", shown_as_a=shown)
            append_label(run_dir, label)


# The output folders of examples/github-actions-judge-gate.yml: a job's fresh checkout has none of them.
WORKFLOW_OUTPUTS = ("runs", "viewer-site")


def run_example(ws: Workspace, example: Example, background: list[Background]) -> None:
    if example.fresh_checkout:
        for folder in WORKFLOW_OUTPUTS:
            shutil.rmtree(ws.root / folder, ignore_errors=True)
    env = example_env(ws, example)
    command = ws.substitute(example.command)
    for part in (p.strip() for p in command.split(" && ")):
        skip = _not_here(part)
        if skip is not None and skip[1] is None:
            continue
        assignment = re.fullmatch(r"(?:export )?([A-Za-z_]\w*)=(\$\(.*\)|\"[^\"]*\"|'[^']*'|\S*)", part)
        if assignment is not None:  # the shell computes the value; later commands see it
            code, value = run_shell(ws, f"printf %s {assignment.group(2)}", env)
            assert code == 0, (example.where, part, value)
            ws.env[assignment.group(1)] = env[assignment.group(1)] = value
            continue
        part = re.sub(r"\$\{?(\w+)\}?", lambda m: ws.env.get(m.group(1), m.group(0)), part)
        words = shlex.split(part)
        extra, words = _env_prefix(words)
        step_env: Env = {**env, **extra}
        if part.endswith(" &"):
            words = words[:-1]
        if words[:2] == ["inspect", "view"]:  # Inspect's viewer runs until Ctrl-C, as `prbj view` does
            stopped_first: list[str] = []
            stop_servers(example, background, stopped_first)
            assert not stopped_first, stopped_first
            background.append(start_server(ws, words, step_env))
            continue
        if words[:1] != ["prbj"]:
            code, output = run_shell(ws, part, step_env)
            assert code == 0, (example.where, part, output)
            _check_outputs(example, output)
            continue
        words = _expand_globs(words, ws.root, ws.env["HOME"])
        if words[1:2] in (["serve"], ["view"]) and "--bundle" not in words:
            # A server runs until Ctrl-C: the reader stops one before starting the next.
            stopped: list[str] = []
            stop_servers(example, background, stopped)
            assert not stopped, stopped
            background.append(start_server(ws, words, step_env))
            _check_outputs(example, "\n".join(background[-1].lines))
            continue
        if words[1:3] == ["build", "agreement"]:
            if words[4:]:
                fill_sheets(ws, words)
            else:
                label_pairs(ws.root / words[3])
        code, output = run_prbj(words, step_env)
        if example.command in ON_THE_SAMPLE:
            expected_code, ending = ON_THE_SAMPLE[example.command]
            assert code == expected_code and output.rstrip().endswith(ending), (example.where, output)
            continue
        if skip is not None:
            assert _one_line_error(code, output), (example.where, part, skip[0], code, output)
            continue
        assert code == 0, (example.where, part, code, output)
        _check_outputs(example, output)


def stop_servers(example: Example, background: list[Background], failures: list[str]) -> None:
    while background:
        server = background.pop()
        # Inspect's viewer is a click command: Ctrl-C ends it with click's "Aborted!" and exit code 1.
        stopped = (
            0,
            130,
            -signal.SIGINT,
            *((1,) if Path(str(server.process.args[0])).name == "inspect" else ()),
        )
        if server.stop() not in stopped:
            failures.append(f"{example.where}: stopping {server.process.args}: " + "\n".join(server.lines))


def _check_outputs(example: Example, output: str) -> None:
    for expected in example.outputs:
        expected = re.sub(r"(?<=:)8000\b", "...", expected)
        assert _matches(expected, output), (example.where, f"shown: {expected}", output)


def test_every_documented_example_runs_as_written(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace.root)
    ws = workspace
    # The runs the placeholders name: the reader's own runs of the sample, made the documented way (the default
    # offline judges, which reports/baselines/sample-offline.json holds, and an LLM judge; then LLM judges alone).
    offline = "prbj judge -p random -p length -p bm25-profile -p embed-profile"
    setup = {
        "documented": f"{offline} -p gemini-3-flash --confidence available",
        "documented-again": f"{offline} -p gemini-3-flash --confidence available",
        "documented-llm": "prbj judge -p gemini-3.1-pro -p claude-sonnet-4-6 --context profile",
    }
    for name, command in setup.items():
        code, output = run_prbj(
            [*shlex.split(command), "--no-progress", "--out", f"tmp-{name}"], dict(ws.env)
        )
        assert code == 0, output
        (made,) = (ws.root / f"tmp-{name}").iterdir()
        made.rename(ws.root / "reports" / name)
    examples = all_examples()
    only = os.environ.get(
        "PRBJ_EXAMPLES_ONLY"
    )  # a regex over "file:line: command", to rerun a few while fixing
    if only:
        examples = [example for example in examples if re.search(only, f"{example.where}: {example.command}")]
    failures = []
    background: list[Background] = []
    timings: list[tuple[float, str]] = []
    for index, example in enumerate(examples):
        started = time.monotonic()
        try:
            run_example(ws, example, background)
        except Exception as err:  # every example's failure is collected, then reported together
            failures.append(f"{example.where}: {example.command}\n  {type(err).__name__}: {str(err)[:1500]}")
        timings.append((time.monotonic() - started, f"{example.where}: {example.command[:100]}"))
        # A server runs for the rest of its block, then stops as Ctrl-C stops it.
        last_of_block = index + 1 == len(examples) or examples[index + 1].block != example.block
        if last_of_block:
            stop_servers(example, background, failures)
    if os.environ.get("PRBJ_EXAMPLES_TIMING"):  # where the step's time goes: the slowest examples
        for seconds, what in sorted(timings, reverse=True)[:25]:
            print(f"{seconds:7.2f} s  {what}")
    assert not failures, f"{len(failures)} of {len(examples)} examples failed:\n" + "\n".join(failures)
