"""`--context synthesized` (SynthesizeMe's persona) end to end: the real `prbj judge` command against the loopback
provider, the synthesizer and the judges each speaking a provider's own wire format.

The scripted synthesizer writes a persona that repeats every marker it was shown (tests/per_user_fixture.py: each
earlier choice carries HIST<user>n<k>, each judged row TEST<user>t<k>, the dataset's persona and facts PERSONA<user>
and FACT<user>), so a row that leaked into what it read would show in the persona, in personas.jsonl and in every
judge request that shows it. The scripted judge picks the chosen answer exactly when it is shown a persona, so the
figures say whether the persona reached it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from loopback import LENGTH, REFUSED, ChatRequest, Fault, ProviderServer, Reply
from per_user_fixture import HISTORY_ROWS, TEST_ROWS, USERS, user_records

from conftest import make_record, write_jsonl
from prbj.cli import main
from prbj.context.synthesizer import NO_PERSONA, parse_persona, render_choices
from prbj.data.schema import Preference
from prbj.llm import gateway as gateway_module
from prbj.llm.providers import bundled_providers_dir
from prbj.llm.retry import RetryPolicy

KEYS = {
    "GEMINI_API_KEY": "dummy-key-for-the-loopback",
    "OPENAI_API_KEY": "dummy-key-for-the-loopback",
    "ANTHROPIC_API_KEY": "dummy-key-for-the-loopback",
}
# Bundled profile → the wire format the loopback provider sees.
FAMILIES = {"gemini-3-flash": "gemini", "gpt-5.1": "openai", "claude-sonnet-4-6": "anthropic"}
SYNTHESIZER_MARK = "write a persona of that person"  # prbj/prompts/synthesizer_system.txt
PERSONA_HEADING = "## A persona of this user"  # prbj/prompts/context_persona.txt
# In every persona the scripted synthesizer writes: where it is found, a persona got there.
TOKEN = "Zorbluff"
_MARKERS = re.compile(r"(?:HIST|PERSONA|FACT)u\d+(?:n\d+)?|TESTu\d+t\d+")
_HISTORY = re.compile(r"HIST(u\d+)n\d+")
_JUDGED = re.compile(r"TEST(u\d+)t\d+")


def is_synthesizer(request: ChatRequest) -> bool:
    return SYNTHESIZER_MARK in request.system


def persona_reply(request: ChatRequest) -> str:
    """Reasons about each choice, then writes a persona repeating every marker it read."""
    markers = " ".join(sorted(set(_MARKERS.findall(request.last_user))))
    return (
        "Choice 1: the person picked the practical reply, so they may value concrete advice.\n"
        f"Persona: A practical {TOKEN} photographer who values concrete, affordable advice; read {markers}."
    )


def chosen_first(text: str) -> bool:
    return text.index("answer a bright prime lens") < text.index("other a long zoom lens")


def judge_reply(request: ChatRequest) -> str:
    """Right exactly when shown a persona; a pairwise verdict, or a 1-10 score for the pointwise prompt. It quotes
    the persona it was shown, as judges do."""
    text = request.prompt
    sees = TOKEN in text
    quote = next((line for line in text.splitlines() if TOKEN in line), "")
    if "Score:" in request.system or "evaluator of an answer" in text:
        good = ("answer a bright prime lens" in text) == sees
        return f"{quote}\nScore: {8 if good else 3}"
    letter = "A" if chosen_first(text) == sees else "B"
    return f"As the persona says: {quote}\nResult: {letter}"


def reply(request: ChatRequest) -> str | Reply:
    return persona_reply(request) if is_synthesizer(request) else judge_reply(request)


def unpaced_profiles(folder: Path, **extra: str) -> Path:
    """The bundled profiles without their request and token pacing, plus `extra` profiles (name → TOML). A failed
    call is charged its worst case against a token limit, so retried 500s would otherwise wait out minutes."""
    folder.mkdir(exist_ok=True)
    for profile in bundled_providers_dir().glob("*.toml"):
        text = re.sub(r"(?m)^rpm\s*=.*$", "rpm = 600000", profile.read_text(encoding="utf-8"))
        text = re.sub(r"(?m)^(?:input_|output_)?tpm\s*=.*$", "", text)
        (folder / profile.name).write_text(text, encoding="utf-8")
    for name, text in extra.items():
        (folder / f"{name}.toml").write_text(text, encoding="utf-8")
    return folder


class Run:
    def __init__(self, exit_code: int, output: str, run_dir: Path | None) -> None:
        self.exit_code, self.output, self.run_dir = exit_code, output, run_dir

    @property
    def judgments(self) -> pl.DataFrame:
        assert self.run_dir is not None
        return pl.read_parquet(self.run_dir / "judgments.parquet")

    @property
    def personas(self) -> dict[str, dict[str, Any]]:
        assert self.run_dir is not None
        lines = (self.run_dir / "personas.jsonl").read_text(encoding="utf-8").splitlines()
        return {record["user_id"]: record for record in map(json.loads, lines)}

    def accuracy(self, context: str) -> float:
        assert self.run_dir is not None
        results = json.loads((self.run_dir / "summary.json").read_text())["results"]
        [row] = [r for r in results if r["subset"] == "all" and r["context"] == context]
        return float(row["accuracy"])

    def of_user(self, user: str, context: str) -> pl.DataFrame:
        return self.judgments.filter((pl.col("user_id") == user) & (pl.col("context") == context))


class Harness:
    def __init__(self, tmp_path: Path, server: ProviderServer) -> None:
        self.tmp_path = tmp_path
        self.server = server
        self.providers = unpaced_profiles(tmp_path / "providers")
        self.runs = 0

    def data(self, records: list[dict[str, Any]] | None = None, name: str = "users.jsonl") -> Path:
        return write_jsonl(self.tmp_path / name, user_records() if records is None else records)

    def judge(self, dataset: Path, *args: str, api_base: bool = True, policy: str | None = "any") -> Run:
        self.runs += 1
        out = self.tmp_path / f"out-{self.runs}"
        command = ["judge", "--no-progress", "--dataset", str(dataset), "--out", str(out)]
        command += ["--cache-dir", str(self.tmp_path / "cache"), "--providers-dir", str(self.providers)]
        command += ["--api-base", self.server.url] if api_base else []
        # Made-up users, nothing personal: any provider may be sent them unless a test says otherwise.
        command += ["--personal-data", policy] if policy else []
        result = CliRunner().invoke(
            main,
            [*command, *args],
            env={**KEYS, "PRBJ_PRIVATE_DIR": str(self.tmp_path / "private")},
            catch_exceptions=False,
            terminal_width=200,
        )
        dirs = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
        return Run(result.exit_code, result.output, dirs[0] if len(dirs) == 1 else None)

    def synthesized(self) -> list[ChatRequest]:
        return [r for r in self.server.requests if is_synthesizer(r)]

    def judged(self) -> list[ChatRequest]:
        return [r for r in self.server.requests if not is_synthesizer(r)]


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=reply) as running:
        yield running


@pytest.fixture
def harness(tmp_path: Path, server: ProviderServer) -> Harness:
    server.reset()
    server.reply = reply
    return Harness(tmp_path, server)


SYNTHESIZED = ("--context", "synthesized", "--synthesizer", "claude-sonnet-4-6")


# --- one call per user, shown to the judge, cached ---------------------------------------------------------


def test_one_call_per_user_whose_persona_the_judge_is_shown_and_a_rerun_pays_nothing(
    harness: Harness,
) -> None:
    data = harness.data()
    args = ("-p", "gemini-3-flash", "--context", "none", *SYNTHESIZED, "--order", "both")
    run = harness.judge(data, *args)
    assert run.exit_code == 0, run.output
    # One synthesizer call per user (Anthropic's wire), though each user has 2 pairs judged in 2 orders.
    synthesized = harness.synthesized()
    assert len(synthesized) == len(USERS)
    assert {r.family for r in synthesized} == {"anthropic"}
    judged = harness.judged()
    assert len(judged) == len(USERS) * TEST_ROWS * 2 * 2 and {r.family for r in judged} == {"gemini"}
    shown = [r for r in judged if PERSONA_HEADING in r.prompt]
    assert len(shown) == len(judged) // 2 and all(TOKEN in r.prompt for r in shown)
    # The scripted judge is right exactly when it sees a persona.
    assert run.accuracy("synthesized") == 1.0 and run.accuracy("none") == 0.0
    personas = run.personas
    assert sorted(personas) == list(USERS)
    for user, record in personas.items():
        assert record["status"] == "ok" and record["choices"] == HISTORY_ROWS and not record["cached"]
        assert TOKEN in record["persona"] and f"HIST{user}n1" in record["persona"]
    assert run.run_dir is not None
    described = json.loads((run.run_dir / "run.json").read_text())["synthesizer"]
    assert described["provider"] == "claude-sonnet-4-6" and "synthesizer_user" in described["templates"]

    # A rerun, and a --cache-only replay: nothing sent, the same figures, the personas from the cache.
    for extra in ((), ("--cache-only",)):
        harness.server.reset()
        again = harness.judge(data, *args, *extra)
        assert again.exit_code == 0, again.output
        assert harness.server.requests == []
        assert again.accuracy("synthesized") == 1.0
        assert all(record["cached"] for record in again.personas.values())
        assert {u: r["persona"] for u, r in again.personas.items()} == {
            u: r["persona"] for u, r in personas.items()
        }


# --- never a judged row, never another user's ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["pairwise", "pointwise"])
def test_no_judged_row_and_no_other_users_row_reaches_the_synthesizer_or_the_persona(
    harness: Harness, mode: str
) -> None:
    run = harness.judge(harness.data(), "-p", "gpt-5.1", *SYNTHESIZED, "--mode", mode)
    assert run.exit_code == 0, run.output
    synthesized = harness.synthesized()
    assert len(synthesized) == len(USERS)
    for request in synthesized:
        text = request.prompt
        [user] = set(_HISTORY.findall(text))  # one user's history, and all of it
        assert len(set(re.findall(rf"HIST{user}n\d+", text))) == HISTORY_ROWS
        assert not _JUDGED.findall(text), "a judged row reached the synthesizer"
        # It reads earlier choices only: not the dataset's persona or stated facts.
        assert "PERSONA" not in text and "FACT" not in text
    for user, record in run.personas.items():
        markers = set(_MARKERS.findall(record["persona"]))
        assert markers == {f"HIST{user}n{n}" for n in range(1, HISTORY_ROWS + 1)}
    # What each judge request shows of users: its own judged row, and its own user's persona only.
    for request in harness.judged():
        rows = set(_JUDGED.findall(request.prompt))
        assert len(rows) == 1
        assert set(_HISTORY.findall(request.prompt)) == rows
        assert "PERSONA" not in request.prompt and "FACT" not in request.prompt


# --- failures of the synthesizer: that user's judgments fail, one line each ------------------------------------

# (what the synthesizer sends for u2, the judgments' status, what their error says, their counted cause)
FAILURES = {
    "empty": (Reply(""), "persona_error", "the reply was empty", "persona error"),
    "no persona": (
        Reply("I'm sorry, I can't help with that."),
        "persona_error",
        "held no persona",
        "persona error",
    ),
    "refusal": (Reply("", REFUSED), "refused", "refused", "synthesizer: refused"),
    "cut off": (
        Reply("Choice 1: practical.\nPersona: A practical photographer who", LENGTH),
        "truncated",
        "a persona cut short is not shown",
        "synthesizer: truncated",
    ),
}


@pytest.mark.parametrize("synthesizer", list(FAMILIES))
@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_failed_synthesis_fails_that_users_judgments_with_one_line_and_the_run_goes_on(
    harness: Harness, synthesizer: str, failure: str
) -> None:
    sent, status, says, cause = FAILURES[failure]

    def scripted(request: ChatRequest) -> str | Reply:
        if is_synthesizer(request) and "HISTu2" in request.prompt:
            return sent
        return reply(request)

    harness.server.reply = scripted
    run = harness.judge(harness.data(), "-p", "gemini-3-flash", "--context", "synthesized", "--synthesizer",
                        synthesizer, "--context", "none")  # fmt: skip
    assert run.exit_code == 0, run.output
    failed = run.of_user("u2", "synthesized")
    assert failed["status"].to_list() == [status] * TEST_ROWS
    for error in failed["error"].to_list():
        assert error.startswith("synthesizer: ") and says in error and "\n" not in error
    # Counted under failures by cause: "synthesizer: refused (SAFETY) ×2: ..." and the like.
    assert re.search(rf"{re.escape(cause)}[^\n×]*×{TEST_ROWS}", run.output), run.output
    # The judge was never asked about u2 with a persona; u2's other context and the other users are judged.
    assert not [r for r in harness.judged() if "TESTu2" in r.prompt and PERSONA_HEADING in r.prompt]
    assert run.of_user("u2", "none")["status"].to_list() == ["ok"] * TEST_ROWS
    ok = run.judgments.filter((pl.col("context") == "synthesized") & (pl.col("user_id") != "u2"))
    assert ok["status"].to_list() == ["ok"] * (len(USERS) - 1) * TEST_ROWS
    assert run.personas["u2"]["status"] == status and run.personas["u2"]["persona"] == ""
    # One call for u2 whatever befell it: its two pairs shared the outcome.
    assert len([r for r in harness.synthesized() if "HISTu2" in r.prompt]) == 1


def test_server_errors_past_the_retries_fail_that_users_judgments(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        gateway_module, "DEFAULT_RETRY", RetryPolicy(max_total_seconds=1.0, initial_wait=0.01, max_wait=0.05)
    )

    def u2_fails(request: ChatRequest, asked_before: int) -> Fault | None:
        return Fault("500", retry_after=0) if is_synthesizer(request) and "HISTu2" in request.prompt else None

    harness.server.faults_by = u2_fails
    run = harness.judge(harness.data(), "-p", "gemini-3-flash", *SYNTHESIZED)
    assert run.exit_code == 0, run.output
    failed = run.of_user("u2", "synthesized")
    assert failed["status"].to_list() == ["api_error"] * TEST_ROWS
    assert failed["cause"].to_list() == ["synthesizer: 500 Internal Server Error"] * TEST_ROWS
    assert f"synthesizer: 500 Internal Server Error ×{TEST_ROWS}" in run.output
    assert len([r for r in harness.synthesized() if "HISTu2" in r.prompt]) > 1  # retried
    assert run.judgments.filter(pl.col("user_id") != "u2")["status"].unique().to_list() == ["ok"]


def test_every_synthesis_refused_exits_1_with_the_cause(harness: Harness) -> None:
    harness.server.reply = lambda r: Reply("", REFUSED) if is_synthesizer(r) else judge_reply(r)
    run = harness.judge(harness.data(), "-p", "gemini-3-flash", *SYNTHESIZED)
    assert run.exit_code == 1
    assert "synthesizer: refused" in run.output and "had no successful judgment" in run.output
    assert harness.judged() == []


# --- what a dry run and a budget count ---------------------------------------------------------------------------


def plan(output: str, provider: str) -> tuple[int, int, float]:
    """(calls needed, cached, est. USD) of `provider` in a dry run's plan table."""
    match = re.search(rf"^{re.escape(provider)}\s+(\d+)\s+(\d+)\s+[\d,]+\s+[\d,]+\s+([\d.]+)", output, re.M)
    assert match, output
    return int(match.group(1)), int(match.group(2)), float(match.group(3))


def test_a_dry_run_counts_one_synthesizer_call_per_user_and_bounds_the_judge_calls(harness: Harness) -> None:
    data = harness.data()
    args = (
        "-p",
        "gpt-5.1",
        "--context",
        "none",
        "--context",
        "synthesized",
        "--synthesizer",
        "gemini-3-flash",
    )
    dry = harness.judge(data, *args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert harness.server.requests == []
    assert plan(dry.output, "gemini-3-flash")[:2] == (len(USERS), 0)
    judge_calls, _, judge_usd = plan(dry.output, "gpt-5.1")
    assert judge_calls == len(USERS) * TEST_ROWS * 2
    run = harness.judge(data, *args)
    assert run.exit_code == 0, run.output
    assert run.run_dir is not None
    usage = {u["provider"]: u for u in json.loads((run.run_dir / "run.json").read_text())["usage"]}
    assert usage["gemini-3-flash"]["requests_sent"] == len(USERS)
    # The judge calls were planned with the longest persona the synthesizer may write: a bound.
    assert usage["gpt-5.1"]["cost_usd"] <= judge_usd
    again = harness.judge(data, *args, "--dry-run")
    assert plan(again.output, "gemini-3-flash")[:2] == (0, len(USERS))


def test_max_cost_covers_the_synthesizer(harness: Harness) -> None:
    """A cap below the synthesizer call's worst case is refused before that call, the first paid one (issue 45:
    a budget too small for one call stops the run before anything is sent)."""
    run = harness.judge(harness.data(), "-p", "gemini-3-flash", *SYNTHESIZED, "--max-cost", "0.000001")
    assert run.exit_code == 2, run.output
    assert harness.server.requests == []
    assert "worst case" in run.output and "--cache-only" in run.output


# --- users without history, and data without any ---------------------------------------------------------------


def test_a_user_without_earlier_choices_is_judged_told_there_is_no_persona(harness: Harness) -> None:
    newcomer = [r for r in user_records(("u9",)) if r["split"] == "test"]
    run = harness.judge(harness.data([*user_records(), *newcomer]), "-p", "gemini-3-flash", *SYNTHESIZED)
    assert run.exit_code == 0, run.output
    assert f"1 of {len(USERS) + 1} users made no earlier choice" in " ".join(run.output.split())
    assert len(harness.synthesized()) == len(USERS)  # nothing asked for u9
    shown = [r for r in harness.judged() if "TESTu9" in r.prompt]
    assert len(shown) == TEST_ROWS and all(NO_PERSONA in r.prompt and TOKEN not in r.prompt for r in shown)
    assert run.of_user("u9", "synthesized")["status"].to_list() == ["ok"] * TEST_ROWS
    assert run.personas["u9"] == {
        "user_id": "u9", "status": "no history", "persona": "", "choices": 0, "verified": None, "cached": None,
        "error": None,
    }  # fmt: skip


def test_profiles_of_past_posts_are_refused_with_one_line(harness: Harness) -> None:
    prb = write_jsonl(harness.tmp_path / "pairs.jsonl", [make_record(i) for i in range(1, 4)])
    run = harness.judge(prb, "-p", "gemini-3-flash", *SYNTHESIZED)
    assert run.exit_code == 2
    [line] = [line for line in run.output.splitlines() if line.startswith("error:")]
    assert "--context synthesized" in line and "no user" in line and "--context profile or planner" in line
    assert harness.server.requests == []


def test_context_synthesized_without_a_synthesizer_is_a_usage_error(harness: Harness) -> None:
    run = harness.judge(harness.data(), "-p", "gemini-3-flash", "--context", "synthesized")
    assert run.exit_code == 2 and "--synthesizer" in run.output
    assert harness.server.requests == []


# --- personal data ---------------------------------------------------------------------------------------------


def local_profile(server: ProviderServer, extends: str) -> str:
    return f'extends = "{extends}"\nlocal = true\npaid = false\napi_base = "{server.url}"\nrpm = 600000\n'


@pytest.mark.parametrize("role", ["--planner", "--synthesizer"])
@pytest.mark.parametrize("policy", [None, "local"])
def test_a_policy_refuses_the_synthesizer_exactly_as_the_planner(
    harness: Harness, role: str, policy: str | None
) -> None:
    """Own data under `local` (or no stated policy): a local judge may run, a remote planner or synthesizer may
    not; both are refused by the same check, in the same words, before any request."""
    unpaced_profiles(harness.providers, mine=local_profile(harness.server, "gemini-3-flash"))
    context = "planner" if role == "--planner" else "synthesized"
    run = harness.judge(harness.data(), "-p", "mine", "--context", context, role, "gpt-5.1", api_base=False,
                        policy=policy)  # fmt: skip
    assert run.exit_code == 2
    [line] = [line for line in run.output.splitlines() if line.startswith("error:")]
    assert "provider 'gpt-5.1' is not local" in line or "'gpt-5.1' is not local" in line
    assert harness.server.requests == []


def files_holding(folder: Path, text: str) -> list[Path]:
    """Every file under `folder` holding `text`, Parquet string cells included."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if text.encode() in path.read_bytes():
            found.append(path)
        elif path.suffix == ".parquet":
            frame = pl.read_parquet(path)
            strings = [c for c, t in frame.schema.items() if t == pl.String]
            if any(text in str(v) for c in strings for v in frame[c].to_list()):
                found.append(path)
    return found


def test_personas_stay_out_of_the_run_directory_unless_the_profile_may_stay_there(harness: Harness) -> None:
    unpaced_profiles(
        harness.providers,
        mine=local_profile(harness.server, "gemini-3-flash"),
        synth=local_profile(harness.server, "claude-sonnet-4-6"),
    )
    args = ("-p", "mine", "--context", "synthesized", "--synthesizer", "synth")
    guarded = harness.judge(harness.data(), *args, api_base=False, policy="local")
    assert guarded.exit_code == 0, guarded.output
    assert guarded.run_dir is not None
    assert files_holding(guarded.run_dir, TOKEN) == []
    assert {r["status"] for r in guarded.personas.values()} == {"ok"}
    assert all(r["persona"] is None for r in guarded.personas.values())
    # The texts are in the owner-only private store instead.
    stored = harness.tmp_path / "private" / "runs" / guarded.run_dir.name / "personas.parquet"
    assert all(TOKEN in persona for persona in pl.read_parquet(stored)["persona"].to_list())

    # Under `any` the run directory keeps them (so the check above can fail) ...
    kept = harness.judge(harness.data(), *args, api_base=False, policy="any")
    assert kept.run_dir is not None
    assert {p.name for p in files_holding(kept.run_dir, TOKEN)} >= {"personas.jsonl", "judgments.parquet"}
    # ... and an export leaves them out, quotes in the judge's replies included, unless profiles are asked for.
    for include, expected in ((False, False), (True, True)):
        out = harness.tmp_path / f"export-{include}.csv"
        flags = ["--include-profiles"] if include else []
        result = CliRunner().invoke(
            main, ["export", str(kept.run_dir), "--format", "csv", "--out", str(out), *flags]
        )
        assert result.exit_code == 0, result.output
        assert (TOKEN in out.read_text(encoding="utf-8")) is expected


# --- scalar reward models are shown the persona too ------------------------------------------------------------


def test_a_scalar_reward_model_scores_with_the_persona_after_the_question(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tiny_rm import build_reward_model

    from prbj.judges.scalar import ScalarJudge

    texts = [" ".join(str(v) for v in r.values()) for r in user_records()] + [f"persona {TOKEN} practical"]
    model = build_reward_model(tmp_path / "rm", texts)
    seen: list[str] = []
    original = ScalarJudge._cached_score

    async def recorded(self: ScalarJudge, messages: list[dict[str, str]]) -> dict[str, Any]:
        seen.append(messages[-2]["content"])
        return await original(self, messages)

    monkeypatch.setattr(ScalarJudge, "_cached_score", recorded)
    run = harness.judge(harness.data(), "-p", f"hf:{model}", *SYNTHESIZED)
    assert run.exit_code == 0, run.output
    assert len(seen) == len(USERS) * TEST_ROWS * 2
    for turn in seen:
        [row] = set(_JUDGED.findall(turn))
        assert "What is known about this user:\nPersona: A practical" in turn and TOKEN in turn
        assert set(_HISTORY.findall(turn)) == {row}


# --- --batch: the persona in one round, the judge calls in the next ------------------------------------------


@dataclass
class LiveAndBatch:
    live_calls: int
    live: list[dict[str, Any]]
    batch: list[dict[str, Any]]


def live_and_batch(harness: Harness, tmp_path: Path, *args: str) -> LiveAndBatch:
    """`prbj judge *args` run live, then under --batch on a cache of its own, each in a real process: the batch
    run sends nothing live and submits each request once, as many as the live run sent."""
    data = harness.data()

    def prbj(name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        command = [
            sys.executable, "-m", "prbj", "judge", "--no-progress", "--dataset", str(data), "--personal-data",
            "any", *args, "--api-base", harness.server.url, "--providers-dir", str(harness.providers),
            "--cache-dir", str(tmp_path / f"cache-{name}"), "--out", str(tmp_path / f"out-{name}"), *extra,
        ]  # fmt: skip
        env = {**KEYS, "PRBJ_BATCH_POLL_SECONDS": "0.05", "PRBJ_PRIVATE_DIR": str(tmp_path / "private")}
        return subprocess.run(command, capture_output=True, text=True, timeout=240, env={**os.environ, **env})

    def figures(name: str) -> list[dict[str, Any]]:
        [run_dir] = list((tmp_path / f"out-{name}").iterdir())
        return list(json.loads((run_dir / "summary.json").read_text())["results"])

    live = prbj("live")
    assert live.returncode == 0, live.stderr
    live_calls = harness.server.count()
    harness.server.reset()
    batch = prbj("batch", "--batch")
    assert batch.returncode == 0, batch.stderr
    assert harness.server.count() == 0
    assert len(harness.server.batches.submitted) == live_calls and harness.server.batches.twice() == []
    return LiveAndBatch(live_calls, figures("live"), figures("batch"))


@pytest.mark.processes
def test_batch_buys_the_personas_then_the_judge_calls_and_equals_a_live_run(
    harness: Harness, tmp_path: Path
) -> None:
    runs = live_and_batch(harness, tmp_path, "-p", "gpt-5.1", *SYNTHESIZED)
    assert runs.batch == runs.live


# --- the pieces -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "persona"),
    [
        ("Choice 1: likes short replies.\nPersona: A busy nurse who wants short, kind answers.",
         "A busy nurse who wants short, kind answers."),
        ("<think>Persona: draft</think>\n**Persona:** Retired teacher,\nlikes gardening.",
         "Retired teacher, likes gardening."),
        ("## Persona:\nValues **concise** answers and cites sources.", "Values concise answers and cites sources."),
        ("Reasoning.\n**Synthesized Persona:** A night-shift nurse.", "A night-shift nurse."),
        ("Reasoning.\n### Persona\nA nurse who works nights.", "A nurse who works nights."),
        ("- The user persona is unclear here.\nNothing more.", None),
        ("Persona: first try.\nPersona: A student on a budget who reads sci-fi.",
         "A student on a budget who reads sci-fi."),
        ("Choice 1: practical.", None),
        ("Persona: I cannot tell from these choices.", None),
        ("Persona: Not enough information.", None),
        ("Persona: concise", None),
        ("", None),
    ],
)  # fmt: skip
def test_parse_persona_reads_the_last_persona_line_to_the_end(text: str, persona: str | None) -> None:
    assert parse_persona(text) == persona


def test_the_choices_are_shown_oldest_first_the_newest_kept_and_cut() -> None:
    history = [
        Preference(f"h{n}", f"asked {n}", "picked " + "word " * 400, f"declined {n}") for n in range(40)
    ]
    text = render_choices(history)
    assert text.startswith("Choice 1\nConversation: asked 10\n") and "Conversation: asked 39" in text
    assert "asked 9\n" not in text and text.count("Choice ") == 30
    assert "word " * 300 + "…" not in text and "word " * 299 in text


def test_a_view_holds_a_persona_in_the_synthesized_context_only() -> None:
    from prbj.data import load_dataset

    pair = load_dataset("sample").pairs[0]
    view = pair.view("synthesized", persona="Likes film cameras.")
    assert view.persona == "Likes film cameras." and view.profile == () and view.history == ()
    with pytest.raises(ValueError, match="synthesized"):
        pair.view("synthesized")
    with pytest.raises(ValueError, match="synthesized"):
        pair.view("profile", persona="Likes film cameras.")


def test_a_judge_template_that_never_shows_the_persona_is_refused() -> None:
    from prbj.errors import ConfigError
    from prbj.judges.generative import check_template_shows_context
    from prbj.prompts import Template

    blind = Template("mine", "{question}\nA: {Response_A}\nB: {Response_B}")
    with pytest.raises(
        ConfigError, match=re.escape("--context synthesized needs a {profile} or {context} placeholder")
    ):
        check_template_shows_context(blind, "synthesized", "--judge-template-user")
    check_template_shows_context(
        Template("mine", "{profile}\n{question}"), "synthesized", "--judge-template-user"
    )
