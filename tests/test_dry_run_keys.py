"""A dry run sends nothing, so it needs no key; but it must say which key a real run lacks (issue 35:
`prbj judge -p gemini-3-flash --dry-run` planned silently, while `prbj run --dry-run` named the key)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.cli import main
from prbj.llm.providers import MissingKey

ROOT = Path(__file__).resolve().parents[1]
NO_KEYS = {"GEMINI_API_KEY": None, "OPENAI_API_KEY": None, "ANTHROPIC_API_KEY": None}
MISSING = "API keys not set (a real run needs them): "


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (
            ["judge", "-p", "gemini-3-flash", "--limit", "1", "--no-progress"],
            "GEMINI_API_KEY (gemini-3-flash)",
        ),
        (
            [
                "judge",
                "-p",
                "gpt-5.1",
                "-p",
                "gemini-3-flash",
                "-p",
                "length",
                "--limit",
                "1",
                "--no-progress",
            ],
            "GEMINI_API_KEY (gemini-3-flash), OPENAI_API_KEY (gpt-5.1)",
        ),
        (
            ["bon", "sample", "--policy", "gpt-5.1", "--n", "2", "--limit", "1", "--out", "OUT"],
            "OPENAI_API_KEY (gpt-5.1)",
        ),
        (
            [
                "build",
                "--input",
                str(ROOT / "examples" / "lamp_qa.jsonl"),
                "--out",
                "OUT",
                "-p",
                "gemini-3-flash",
            ],
            "GEMINI_API_KEY (gemini-3-flash)",
        ),
    ],
)
def test_a_dry_run_names_the_keys_a_real_run_lacks(
    args: list[str], named: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = [str(tmp_path / "out") if word == "OUT" else word for word in args]
    result = CliRunner(env=NO_KEYS).invoke(main, [*args, "--dry-run", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert MISSING + named in " ".join(result.output.split())


def test_a_dry_run_with_every_key_set_names_none(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"GEMINI_API_KEY": "gem-test-0123456789"}
    args = ["judge", "-p", "gemini-3-flash", "--limit", "1", "--no-progress", "--dry-run"]
    result = CliRunner(env=env).invoke(main, [*args, "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert "Plan (nothing sent)" in result.output and MISSING not in result.output


def test_a_provider_named_twice_is_listed_once() -> None:
    gpt = MissingKey("OPENAI_API_KEY", "gpt-5.1")
    assert str(MissingKey.of_several([gpt, gpt])).count("gpt-5.1") == 1
    several = str(MissingKey.of_several([gpt, MissingKey("GEMINI_API_KEY", "gemini-3-flash"), gpt]))
    assert several.startswith("API keys not set: OPENAI_API_KEY (gpt-5.1), GEMINI_API_KEY (gemini-3-flash); ")
    assert several.count("gpt-5.1") == 1
