"""Issue 45 item 4: a --max-cost below the worst case of one call (or 0) could pay for nothing. It used to run,
skip every call and write a run of failures (exit 1); it is refused before anything is sent or written, in one
line giving the worst case of one call and --cache-only. A run whose answers are all in the cache still runs
under any cap, 0 included. Over real HTTP against the loopback provider."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from loopback import ProviderServer
from test_gateway_cli import right_answer

from prbj.cli import main


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=right_answer) as running:
        yield running


@pytest.fixture
def providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ProviderServer) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", "oai-floor-test-key")
    monkeypatch.setenv("PRBJ_CACHE_DIR", str(tmp_path / "cache"))
    server.reset()
    folder = tmp_path / "providers"
    folder.mkdir()
    # Worst case of a call: its prompt at $1 per million tokens plus 10 output tokens at $0.001 each (> $0.01).
    (folder / "gpt-5.1.toml").write_text(
        f'model = "openai/gpt-5.1-2025-11-13"\napi_key_env = "OPENAI_API_KEY"\napi_base = "{server.url}"\n'
        "[price]\ninput = 1\noutput = 1000\n[params]\nmax_tokens = 10\n"
    )
    return folder


def _judge(tmp_path: Path, providers: Path, *extra: str) -> tuple[int, str]:
    args = ["judge", "--no-progress", "-p", "gpt-5.1", "--providers-dir", str(providers), "--limit", "3"]
    result = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "out"), *extra])
    return result.exit_code, result.output


@pytest.mark.parametrize("cap", ["0.005", "0"])
def test_a_cap_below_one_call_is_refused_before_anything_is_sent(
    tmp_path: Path, providers: Path, server: ProviderServer, cap: str
) -> None:
    code, output = _judge(tmp_path, providers, "--max-cost", cap)
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 2, output
    assert len(lines) == 1, lines
    match = re.fullmatch(
        rf"error: --max-cost {cap} is below the worst case of one call to gpt-5\.1: \$(0\.01\d\d) "
        r"\(([\d,]+) prompt tokens and up to 10 output tokens\); nothing was sent: raise --max-cost, or replay "
        r"answers already in the cache with --cache-only",
        lines[0],
    )
    assert match is not None, lines[0]
    prompt_tokens = int(match.group(2).replace(",", ""))
    assert float(match.group(1)) == pytest.approx(prompt_tokens * 1e-6 + 10 * 0.001, abs=6e-5)
    assert server.count() == 0
    assert not (tmp_path / "out").exists()


def test_a_run_answered_by_the_cache_runs_under_any_cap(
    tmp_path: Path, providers: Path, server: ProviderServer
) -> None:
    code, output = _judge(tmp_path, providers)
    assert code == 0, output
    sent = server.count()
    assert sent > 0
    code, output = _judge(tmp_path, providers, "--max-cost", "0")
    assert code == 0, output
    assert server.count() == sent  # nothing bought again
    assert "run directory:" in output


def test_a_cap_that_pays_for_some_calls_still_runs_them(
    tmp_path: Path, providers: Path, server: ProviderServer
) -> None:
    """Not refused: the cap covers a call; the calls it cannot cover are skipped and counted, as before."""
    code, output = _judge(tmp_path, providers, "--max-cost", "0.025", "--concurrency", "1")
    assert code == 1, output
    assert 1 <= server.count() < 6
    assert "budget reached" in output
