"""Names in an experiment file are checked when it is read (issue 35): a mistyped provider was caught only when
its stage started, after the experiment's folders were made. The error names file, line and field (exit 2)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.cli import main
from prbj.cli.run import ClickCommandLine
from prbj.errors import ConfigError
from prbj.experiments.schema import load_experiment

CLI = ClickCommandLine(main)


def write(folder: Path, text: str) -> Path:
    path = folder / "study.toml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            """
            [[judges]]
            provider = "length"

            [[judges]]
            provider = "lenght"
            """,
            "study.toml:5: field 'judges[2].provider': --provider 'lenght': unknown judge; did you mean 'length'?",
        ),
        (
            """
            [planner]
            provider = "gemini-3-flsh"

            [[judges]]
            provider = "gemini-3-flash"
            context = "planner"
            """,
            "study.toml:2: field 'planner.provider': --provider 'gemini-3-flsh': no such provider profile; did "
            "you mean 'gemini-3-flash'?",
        ),
        (
            """
            [bon]
            policy = "qwen-tiny"
            gold = "demo"
            rms = ["length"]
            """,
            "study.toml:2: field 'bon.policy': --provider 'qwen-tiny': no such provider profile",
        ),
        (
            """
            [bon]
            policy = "demo"
            gold = "gpt-5"
            rms = ["length"]
            """,
            "study.toml:3: field 'bon.gold': --provider 'gpt-5': no such provider profile; did you mean 'gpt-5.1'?",
        ),
        (
            """
            [bon]
            policy = "demo"
            gold = "demo"
            rms = ["length", "bm25-profle"]
            """,
            "study.toml:4: field 'bon.rms[2]': --provider 'bm25-profle': unknown judge; did you mean "
            "'bm25-profile'?",
        ),
    ],
)
def test_an_unknown_name_is_caught_when_the_file_is_read(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_experiment(path, CLI)
    message = str(caught.value).replace(str(path), "study.toml")
    assert "\n" not in message and message.startswith(expected), message


def test_a_profile_of_the_experiments_own_providers_dir_is_known(tmp_path: Path) -> None:
    own = tmp_path / "my-providers"
    own.mkdir()
    (own / "my-model.toml").write_text('model = "openai/my-model"\npaid = false\napi_key_required = false\n')
    text = """
        [defaults]
        providers_dir = "my-providers"

        [[judges]]
        provider = "my-model"

        [bon]
        policy = "my-model"
        gold = "demo"
        rms = ["my-model"]
        """
    experiment = load_experiment(write(tmp_path, text), CLI)
    assert [judge.provider for judge in experiment.judges] == ["my-model"]
    with pytest.raises(ConfigError, match="judges"):
        load_experiment(write(tmp_path, text.replace('providers_dir = "my-providers"\n', "")), CLI)


def test_prbj_run_stops_before_making_any_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, '[[judges]]\nprovider = "length"\n\n[[judges]]\nprovider = "lenght"\n')
    result = CliRunner().invoke(main, ["run", "study.toml"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: study.toml:5: field 'judges[2].provider'"), lines
    assert not (tmp_path / "reports").exists()
