"""Model lifecycle: deprecation dates from LiteLLM's bundled model map in `prbj providers`, a warning before the
first call on a model within 30 days of its date or past it, a retired model's 404 that names the date and the
profile to use instead, and the retired profile name pointing at its successor. "Today" is injected."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner
from loopback import ProviderServer

from conftest import make_record, write_jsonl
from prbj.cli import main
from prbj.llm import lifecycle
from prbj.llm.litellm_setup import ModelFacts
from prbj.llm.providers import ProviderSpec

RETIRED_MODEL = "claude-sonnet-4-5-20250929"  # LiteLLM's map: deprecation_date 2026-11-30


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=lambda request: "Weighing both.\nResult: A") as running:
        yield running


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    """A user's own profile still on the Sonnet 4.5 snapshot."""
    folder = tmp_path / "providers"
    folder.mkdir()
    (folder / "old-claude.toml").write_text(
        f'model = "anthropic/{RETIRED_MODEL}"\napi_key_env = "ANTHROPIC_API_KEY"\nmax_concurrency = 2\n'
        '[price]\ninput = "litellm"\noutput = "litellm"\n[params]\ntemperature = 0\nmax_tokens = 64\n'
    )
    return folder


def on(day: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "today", lambda: date.fromisoformat(day))


def prbj(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        main,
        list(args),
        env={"ANTHROPIC_API_KEY": "ant-lifecycle"},
        catch_exceptions=False,
        terminal_width=200,
    )
    return result.exit_code, result.output


def judge(
    server: ProviderServer, profiles: Path, tmp_path: Path, provider: str, *extra: str
) -> tuple[int, str]:
    dataset = write_jsonl(tmp_path / "pairs.jsonl", [make_record(i) for i in range(1, 4)])
    return prbj(
        "judge", "--no-progress", "--dataset", str(dataset), "--personal-data", "any",
        "--out", str(tmp_path / "out"), "-p", provider,
        "--context", "none", "--api-base", server.url, "--cache-dir", str(tmp_path / "cache"),
        "--providers-dir", str(profiles), *extra,
    )  # fmt: skip


def test_providers_shows_each_profile_s_deprecation_date(profiles: Path, monkeypatch) -> None:
    on("2026-11-15", monkeypatch)
    code, output = prbj("providers", "--providers-dir", str(profiles))
    assert code == 0, output
    blocks = {block.split("\n", 1)[0]: block for block in output.split("\n\n")}
    assert "retires 2026-11-30 (in 15 days)" in blocks["old-claude"]
    assert "retires 2027-04-01 (in 137 days)" in blocks["gpt-5.1"]
    assert "retires no date announced" in blocks["claude-sonnet-4-6"]
    on("2026-12-01", monkeypatch)
    assert "retires 2026-11-30 (retired)" in prbj("providers", "--providers-dir", str(profiles))[1]


def test_a_run_within_30_days_of_the_date_warns_before_the_first_call(
    server: ProviderServer, profiles: Path, tmp_path: Path, monkeypatch
) -> None:
    on("2026-11-15", monkeypatch)
    code, output = judge(server, profiles, tmp_path, "old-claude", "--dry-run")
    assert code == 0 and server.requests == []  # said while resolving the provider: nothing was sent
    note = f"old-claude: anthropic/{RETIRED_MODEL} retires on 2026-11-30 (in 15 days"
    assert note in output and "use the profile 'claude-sonnet-4-6' instead" in output
    code, output = judge(server, profiles, tmp_path, "old-claude")
    assert code == 0 and output.index(note) < output.index("Model calls")
    run_json = next((tmp_path / "out").glob("*/run.json")).read_text()
    assert "retires on 2026-11-30" in run_json  # recorded with the provider's parameters
    on("2026-10-31", monkeypatch)  # 30 days ahead still warns, 31 days do not
    assert (
        "retires on 2026-11-30 (in 30 days" in judge(server, profiles, tmp_path, "old-claude", "--dry-run")[1]
    )
    on("2026-10-30", monkeypatch)
    assert "retires on" not in judge(server, profiles, tmp_path, "old-claude", "--dry-run")[1]


def test_a_retired_model_s_404_names_the_date_and_the_profile_to_use(
    server: ProviderServer, profiles: Path, tmp_path: Path, monkeypatch
) -> None:
    on("2026-12-01", monkeypatch)
    server.retired = {RETIRED_MODEL}
    code, output = judge(server, profiles, tmp_path, "old-claude")
    assert code == 1
    assert f"anthropic/{RETIRED_MODEL} was retired on 2026-11-30" in output  # the warning before the calls
    causes = output.split("failures by cause", 1)[1]
    assert "HTTP 404" in causes and "was retired on 2026-11-30" in causes
    assert "use the profile 'claude-sonnet-4-6' instead" in causes
    assert len(server.requests) <= 3  # the breaker stopped the run after three 404s
    # The successor answers.
    server.reset()
    code, output = judge(server, profiles, tmp_path, "claude-sonnet-4-6")
    assert code == 0, output
    assert {r.model for r in server.requests} == {"claude-sonnet-4-6"}


@pytest.mark.parametrize("command", [("judge", "-p"), ("bon", "sample", "--policy")])
def test_the_retired_profile_name_points_at_its_successor(command: tuple[str, ...]) -> None:
    code, output = prbj(*command, "claude-sonnet-4-5", "--dry-run")
    assert code == 2
    assert "'claude-sonnet-4-5': this profile was retired" in output
    assert "use --provider claude-sonnet-4-6" in output


def test_warning_boundaries() -> None:
    spec = ProviderSpec(name="p", model=f"anthropic/{RETIRED_MODEL}", api_key_env=None)
    facts = ModelFacts(deprecation_date="2026-11-30")
    assert lifecycle.retirement_warning(spec, facts, date(2026, 10, 30), None) is None
    assert "in 1 day;" in (lifecycle.retirement_warning(spec, facts, date(2026, 11, 29), None) or "")
    assert "was retired on" in (lifecycle.retirement_warning(spec, facts, date(2026, 12, 1), "x") or "")
    assert lifecycle.retirement_warning(spec, ModelFacts(), date(2026, 12, 1), None) is None
