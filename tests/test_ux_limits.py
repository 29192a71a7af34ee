"""Issue 16, limits and profiles: per-run limit options, partial profiles, a fast `prbj providers`, and
"did you mean …?" for mistyped names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.cli import main
from prbj.data.loaders import match_subset
from prbj.errors import ConfigError, DataError
from prbj.judges.setup import resolve_provider
from prbj.llm.providers import resolve_provider as resolve_profile
from prbj.llm.setup import GatewayOptions


@pytest.mark.parametrize(
    "command",
    [["judge"], ["bon", "score"], ["bon", "sample"], ["bon", "evaluate"], ["build"], ["serve"]],
)
def test_every_model_calling_command_takes_the_limit_options(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--rpm", "--tpm", "--input-tpm", "--output-tpm", "--max-concurrency", "--timeout"):
        assert option in result.output, (command, option)


def test_limit_options_override_the_profile_for_this_run(tmp_path: Path) -> None:
    shared = GatewayOptions(
        cache_dir=tmp_path / "cache", dry_run=True, rpm=5000, max_concurrency=3, timeout=7
    )
    with shared.open() as gateway:
        provider = resolve_provider("gemini-3-flash", shared, gateway)
    assert (provider.rpm, provider.max_concurrency, provider.timeout) == (5000, 3, 7)
    assert provider.flagged == {"rpm", "max_concurrency", "timeout"}  # the run reports these as flags
    assert provider.tpm == resolve_profile("gemini-3-flash").tpm  # not given: the profile's
    assert GatewayOptions().limit_overrides == {}


def test_partial_profile_extends_a_bundled_one(tmp_path: Path) -> None:
    (tmp_path / "fast-flash.toml").write_text(
        'extends = "gemini-3-flash"\nrpm = 4000\n[params]\nmax_tokens = 512\n'
    )
    # A profile named like a bundled one may extend it: only the fields it states change.
    (tmp_path / "gpt-5.1.toml").write_text('extends = "gpt-5.1"\nmax_concurrency = 2\n')
    base = resolve_profile("gemini-3-flash")
    fast = resolve_profile("fast-flash", tmp_path)
    assert fast.model == base.model and fast.input_price == base.input_price
    assert fast.rpm == 4000 and fast.params == {**base.params, "max_tokens": 512}
    assert "extends gemini-3-flash" in fast.source
    gpt = resolve_profile("gpt-5.1", tmp_path)
    assert gpt.max_concurrency == 2 and gpt.model == resolve_profile("gpt-5.1").model


def test_extends_an_unknown_profile_says_which_are_near(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text('extends = "gemini-flash"\n')
    with pytest.raises(ConfigError, match="did you mean 'gemini-3-flash'"):
        resolve_profile("mine", tmp_path)


def test_providers_lists_sources_without_importing_litellm(tmp_path: Path) -> None:
    # Its speed (under a second) is measured by bench/bench_replay.py; what keeps it fast is checked here.
    (tmp_path / "fast-flash.toml").write_text('extends = "gemini-3-flash"\nrpm = 4000\n')
    code = (
        "import sys; from click.testing import CliRunner; from prbj.cli import main;"
        f" r = CliRunner().invoke(main, ['providers', '--providers-dir', {str(tmp_path)!r}]);"
        " print(r.output); print('litellm imported:', 'litellm' in sys.modules); sys.exit(r.exit_code)"
    )
    # Wide enough that the profile's path stays on one line (prbj wraps its output at COLUMNS).
    wide = {**os.environ, "COLUMNS": "300"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=wide)
    assert done.returncode == 0, done.stderr
    assert "litellm imported: False" in done.stdout
    assert "bundled (gemini-3-flash.toml)" in done.stdout
    assert f"{tmp_path / 'fast-flash.toml'} (extends gemini-3-flash)" in done.stdout
    assert "4000 rpm" in done.stdout and "(LiteLLM price map)" in done.stdout


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("lenght", "length"), ("gemini-flash", "gemini-3-flash"), ("bm25-profle", "bm25-profile")],
)
def test_unknown_judge_suggests_the_nearest(typed: str, meant: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["judge", "--no-progress", "-p", typed, "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert f"did you mean '{meant}'" in result.output


def test_unknown_provider_context_and_subset_suggest_the_nearest(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'gemini-3-flash'"):
        resolve_profile("gemini-flash")
    result = CliRunner().invoke(main, ["judge", "--context", "profle", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "did you mean 'profile'" in result.output
    subsets = ["Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture"]
    with pytest.raises(DataError, match="did you mean 'Lifestyle_and_Personal_Development'"):
        match_subset("lifstyle", subsets)
    # Issue 26: a typo in the short form of a subset's name got no suggestion.
    with pytest.raises(DataError, match="did you mean 'Art_and_Entertainment'\\?"):
        match_subset("artt", subsets)
