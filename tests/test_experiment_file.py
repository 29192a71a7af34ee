"""The experiment file: one-line errors naming file, line and field (exit 2), and entries whose keys become the
options of the real prbj commands, whatever options those commands have."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.cli import main
from prbj.cli.run import ClickCommandLine
from prbj.errors import ConfigError
from prbj.experiments.schema import load_experiment
from prbj.experiments.stages import CommandBuilder, stage_graph

CLI = ClickCommandLine(main)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_experiment(path, CLI)
    message = str(caught.value)
    assert "\n" not in message
    return message.replace(str(path), "study.toml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            """
            [experiment]
            dataset = "sample"

            [[judgez]]
            provider = "length"
            """,
            "study.toml:4: field 'judgez': unknown field; did you mean 'judges'?",
        ),
        (
            """
            [[judges]]
            provider = "length"

            [[judges]]
            provider = "gpt-5.1"
            ordr = "both"
            """,
            "study.toml:6: field 'judges[2].ordr': not an option of 'prbj judge'; did you mean 'order'?",
        ),
        (
            """
            [[judges]]
            provider = "gpt-5.1"
            order = "sideways"
            """,
            "study.toml:3: field 'judges[1].order': Invalid value for '--order': 'sideways' is not one of",
        ),
        (
            """
            [experiment]
            limit = "ten"

            [[judges]]
            provider = "length"
            """,
            "study.toml:2: field 'experiment.limit': expected a whole number ≥ 1, got 'ten'",
        ),
        (
            """
            [[judges]]
            provider = "length"
            dataset = "pairs.jsonl"
            """,
            "study.toml:3: field 'judges[1].dataset': not settable here: set it once in [experiment]",
        ),
        (
            """
            [[judges]]
            context = ["none"]
            """,
            "study.toml:1: field 'judges[1]': missing field 'provider'",
        ),
        (
            """
            [[judges]]
            provider = "length"

            [[judges]]
            provider = "length"
            """,
            "study.toml:4: field 'judges[2].name': two judges are named 'length'",
        ),
        (
            """
            [[judges]]
            provider = "gpt-5.1"
            context = ["none", "planner"]
            """,
            "study.toml:3: field 'judges[1].context': context 'planner' needs a [planner] table",
        ),
        (
            """
            [[judges]]
            provider = "length"

            [bon]
            policy = "demo"
            gold = "demo"
            rms = ["length"]

            [bon.evaluate]
            gold_mode = "per-everything"
            """,
            "study.toml:10: field 'bon.evaluate.gold_mode': Invalid value for '--gold-mode'",
        ),
        (
            """
            [[judges]]
            provider = "length"

            [claims]
            smallest_effect = 2
            """,
            "study.toml:5: field 'claims.smallest_effect': expected a number in (0, 1], got 2.0",
        ),
        (
            """
            [[judges]]
            provider = "length"
            [downstream]
            benchmarks = "missing.csv"
            """,
            "study.toml:4: field 'downstream.benchmarks': missing.csv: no such file",
        ),
    ],
)
def test_a_bad_field_is_one_line_naming_file_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    assert error_of(tmp_path, text).startswith(expected)


def test_invalid_toml_names_the_file_and_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, '[[judges]]\nprovider = "length\n')
    assert message.startswith("study.toml: invalid TOML:") and "line 2" in message


def test_the_cli_exits_2_with_the_one_line_error(tmp_path: Path) -> None:
    path = write(tmp_path, '[[judges]]\nprovider = "gpt-5.1"\nmode = "sideways"\n')
    result = CliRunner().invoke(main, ["run", str(path), "--dry-run"])
    assert result.exit_code == 2
    assert f"{path}:3: field 'judges[1].mode'" in " ".join(result.output.split())


def test_entry_keys_become_the_commands_own_options(tmp_path: Path) -> None:
    # Keys are read off the judge command's click definition: options this package never names (--fail-on-error,
    # --samples, --compare) work as well as the common ones, booleans switch flags on or off, lists repeat.
    path = write(
        tmp_path,
        """
        [experiment]
        dataset = "pairs.jsonl"
        subsets = ["art"]
        limit = 5
        seed = 7

        [defaults]
        concurrency = 4
        api_base = "http://127.0.0.1:9/v1"

        [[judges]]
        provider = "gpt-5.1"
        context = ["none", "profile"]
        order = "both"
        repair = false
        batch = true
        samples = 3
        fail-on-error = 0.05
        compare = true
        concurrency = 2
        """,
    )
    (tmp_path / "pairs.jsonl").write_text("")
    experiment = load_experiment(path, CLI)
    stage = next(s for s in stage_graph(experiment) if s.kind == "judge")
    argv = CommandBuilder(experiment, CLI, tmp_path / "out").judge(stage, max_cost=1.5, dry_run=True).argv
    text = " ".join(argv)
    assert f"--dataset {tmp_path / 'pairs.jsonl'} --subset art --limit 5 --seed 7" in text
    for expected in (
        "--context none --context profile",
        "--order both",
        "--no-repair",
        "--batch",
        "--samples 3",
        "--fail-on-error 0.05",
        "--compare",
        "--api-base http://127.0.0.1:9/v1",
        "--max-cost 1.500000",
        "--dry-run",
    ):
        assert expected in text
    # The entry's own value wins over [defaults]; a value given twice would be ambiguous.
    assert "--concurrency 2" in text and "--concurrency 4" not in text
    assert CLI.check(("judge",), argv) is None


def test_defaults_reach_only_the_commands_that_have_them(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [defaults]
        rbo_p = 0.8
        concurrency = 3

        [[judges]]
        provider = "length"

        [bon]
        policy = "demo"
        gold = "demo"
        rms = ["length"]
        """,
    )
    experiment = load_experiment(path, CLI)
    build = CommandBuilder(experiment, CLI, tmp_path / "out")
    judge = build.judge(
        next(s for s in stage_graph(experiment) if s.kind == "judge"), max_cost=None, dry_run=False
    )
    assert "--rbo-p" not in judge.argv and "--concurrency" in judge.argv
    correlate = build.correlate(next(s for s in stage_graph(experiment) if s.kind == "correlate"), [], [])
    assert correlate.argv[correlate.argv.index("--rbo-p") + 1] == "0.8"
    assert "--concurrency" not in correlate.argv


def test_stage_order_follows_the_dependencies(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [planner]
        provider = "gemini-3-flash"

        [[judges]]
        provider = "gpt-5.1"
        context = ["none", "planner"]

        [[judges]]
        name = "short"
        provider = "length"

        [bon]
        policy = "demo"
        gold = "demo"
        rms = ["short"]
        """,
    )
    experiment = load_experiment(path, CLI)
    stages = stage_graph(experiment)
    assert [s.name for s in stages] == [
        "planner",
        "judge:gpt-5.1",
        "judge:short",
        "bon-sample",
        "bon-score",
        "bon-evaluate",
        "downstream",
        "correlate",
        "report",
    ]
    by_name = {s.name: s for s in stages}
    assert by_name["judge:gpt-5.1"].after == ("planner",)
    assert by_name["judge:short"].after == ()
    # A BoN reward model named by a judge entry's name is that judge's provider.
    assert experiment.bon is not None and experiment.bon.rms == ("length",)
    seen: set[str] = set()
    for stage in stages:
        assert set(stage.after) <= seen
        seen.add(stage.name)


def test_each_stage_runs_with_what_is_left_of_its_cap_and_of_the_total(tmp_path: Path) -> None:
    from prbj.experiments.runner import Runner

    path = write(
        tmp_path,
        """
        [experiment]
        max_cost = 10.0

        [[judges]]
        provider = "gpt-5.1"
        max_cost = 3.0

        [[judges]]
        provider = "gemini-3-flash"
        """,
    )
    runner = Runner(load_experiment(path, CLI), CLI, tmp_path / "experiment")
    capped, free, _report = runner.stages
    assert runner.remaining_cap(capped) == 3.0 and runner.remaining_cap(free) == 10.0
    # An interrupted attempt of the capped stage spent $1; the experiment has spent $8.50 in all, reruns included.
    runner.manifest.start(capped.name, "inputs").cost_usd = 1.0
    runner.manifest.spent_usd = 8.5
    assert runner.remaining_cap(capped) == pytest.approx(1.5)
    runner.manifest.spent_usd = 7.5
    assert runner.remaining_cap(capped) == pytest.approx(2.0)
    runner.manifest.spent_usd = 12.0
    assert runner.remaining_cap(free) == 0.0
    argv = (
        CommandBuilder(runner.experiment, CLI, runner.directory)
        .judge(capped, max_cost=runner.remaining_cap(capped), dry_run=False)
        .argv
    )
    assert argv[argv.index("--max-cost") + 1] == "0.000000"


def test_a_manifest_pointing_outside_the_experiment_is_refused(tmp_path: Path) -> None:
    from prbj.errors import DataError
    from prbj.experiments.manifest import Manifest

    directory = tmp_path / "experiment"
    directory.mkdir()
    (directory / "manifest.json").write_text(
        '{"stages": {"bon-sample": {"state": "done", "inputs": "x", "run_dirs": ["../../elsewhere"]}}}'
    )
    with pytest.raises(DataError, match="outside"):
        Manifest.open(directory, {})


def test_personal_data_is_one_field_of_the_experiment_passed_to_every_stage(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [experiment]
        dataset = "pairs.jsonl"
        personal_data = "pseudonymized"

        [[judges]]
        provider = "gpt-5.1"

        [bon]
        policy = "gpt-5.1"
        n = 2
        gold = "gpt-5.1"
        rms = ["length"]
        """,
    )
    (tmp_path / "pairs.jsonl").write_text("")
    experiment = load_experiment(path, CLI)
    build = CommandBuilder(experiment, CLI, tmp_path / "out")
    stages = {stage.kind: stage for stage in stage_graph(experiment)}
    for kind, make in (("judge", build.judge), ("bon-sample", build.bon_sample)):
        argv = make(stages[kind], max_cost=None, dry_run=True).argv
        assert " ".join(argv).count("--personal-data pseudonymized") == 1, kind
        assert CLI.check(("judge",) if kind == "judge" else ("bon", "sample"), argv) is None
    assert "personal_data" in error_of(
        tmp_path, '[experiment]\npersonal_data = "private"\n[[judges]]\nprovider = "length"\n'
    )
    assert "set it once in [experiment]" in error_of(
        tmp_path, '[experiment]\n[[judges]]\nprovider = "gpt-5.1"\npersonal_data = "any"\n'
    )


def test_a_dry_run_on_the_sample_is_scaled_to_the_expected_pairs(tmp_path: Path) -> None:
    """Issue 31 (a mutation the suite let through): a dataset not on this machine is planned on the bundled
    sample and every count scaled to `expected_pairs`; its cost must be scaled too (no test set it before)."""
    from prbj.experiments.dry_run import plan_stages
    from prbj.experiments.runner import Runner, RunOptions

    providers = tmp_path / "providers"
    providers.mkdir()
    (providers / "priced.toml").write_text(
        'model = "openai/priced-judge"\napi_key_env = "OPENAI_API_KEY"\n'
        "[price]\ninput = 3\noutput = 15\n[params]\nmax_tokens = 40\n"
    )

    def plan(dataset: str, extra: str = "") -> tuple[int, float, float, int]:
        path = write(
            tmp_path,
            f"""
            [experiment]
            dataset = "{dataset}"
            {extra}

            [defaults]
            providers_dir = "{providers}"
            cache_dir = "{tmp_path / "cache"}"
            progress = false

            [[judges]]
            provider = "priced"
            context = "none"
            """,
        )
        runner = Runner(load_experiment(path, CLI), CLI, tmp_path / "out", options=RunOptions(dry_run=True))
        plans, _, _ = plan_stages(runner)
        usage = next(u for stage, u in plans if stage.name == "judge:priced")
        (provider,) = usage.providers
        cost, batch = usage.planned_cost_usd, usage.planned_batch_cost_usd
        return usage.planned_calls, cost, batch, provider.prompt_tokens

    calls, cost, batch, tokens = plan("sample")  # the bundled sample itself: 60 pairs
    scaled = plan(str(tmp_path / "not-here.jsonl"), "expected_pairs = 600")
    assert calls == 60 and cost > 0 and batch > 0
    assert scaled[0] == 10 * calls
    assert scaled[1] == pytest.approx(10 * cost) and scaled[2] == pytest.approx(10 * batch)
    assert scaled[3] == 10 * tokens
