"""`prbj run EXPERIMENT.toml`: a whole study from one file, resumable."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from prbj.cli.options import progress_option
from prbj.cli.support import EXIT_INTERRUPTED, friendly_errors, stderr_console
from prbj.experiments.commandline import CommandPath, OptionInfo


class ClickCommandLine:
    """prbj's own commands, as `prbj run` drives them: described from their click definitions, checked by
    click's parser, and run in this process exactly as `prbj <command> <argv>` would run."""

    def __init__(self, root: click.Command) -> None:
        self.root = root

    def _command(self, path: CommandPath) -> click.Command:
        command = self.root
        for word in path:
            assert isinstance(command, click.Group)
            command = command.commands[word]
        return command

    def options(self, command: CommandPath) -> Sequence[OptionInfo]:
        found = []
        for param in self._command(command).params:
            if not isinstance(param, click.Option) or param.name is None:
                continue
            long = [o for o in param.opts if o.startswith("--")]
            if not long:
                continue
            found.append(
                OptionInfo(
                    name=param.name,
                    flag=long[0],
                    off_flag=next((o for o in param.secondary_opts if o.startswith("--")), None),
                    is_flag=param.is_flag,
                    # An option that works alone or with a value (--ray [ADDRESS]).
                    takes_optional_value=bool(getattr(param, "_flag_needs_value", False)),
                    multiple=param.multiple,
                    is_path=isinstance(param.type, click.Path),
                )
            )
        return found

    def check(self, command: CommandPath, argv: Sequence[str]) -> str | None:
        try:
            self._command(command).make_context(" ".join(["prbj", *command]), list(argv))
        except click.UsageError as err:
            return err.format_message()
        return None

    def run(self, command: CommandPath, argv: Sequence[str]) -> int:
        try:
            result = self.root.main(args=[*command, *argv], prog_name="prbj", standalone_mode=False)
        except SystemExit as exit_:
            return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        except click.exceptions.Abort:
            return EXIT_INTERRUPTED
        except click.ClickException as err:
            err.show()
            return err.exit_code
        return result if isinstance(result, int) else 0


@click.command("run")
@click.argument("experiment_file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "--stage",
    "only",
    metavar="NAME",
    help="Run only this stage (planner, judge:<name>, bon-sample, bon-score, bon-evaluate, downstream, correlate, "
    "report); the stages it needs must be done.",
)
@click.option(
    "--status", is_flag=True, help="Print the manifest: each stage's state, whether it is up to date, cost."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Per stage and in total: calls needed, already cached, tokens, cost at live and batch price, time; "
    "sends nothing.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Experiment directory [default: reports/experiments/<name>].",
)
@progress_option
@friendly_errors
def run(
    experiment_file: Path, only: str | None, status: bool, dry_run: bool, out: Path | None, progress: bool
) -> None:
    """Run the experiment declared in EXPERIMENT_FILE (TOML): planner, judge grid, best-of-N, downstream
    outcomes, correlation, report and the paper's claims, as stages in dependency order.

    The experiment directory holds every stage's output and manifest.json. A rerun skips the stages that
    are done with the same inputs and resumes the rest (calls already made come from the cache); editing
    the file reruns only the stages it affects. The file's fields: docs/experiments.md.

    \b
    Examples:
      prbj run experiments/sample.toml                 # offline, on the bundled sample
      prbj run experiments/paper.toml --dry-run        # calls, cost and time of the paper's grid
      prbj run experiments/sample.toml --status
      prbj run experiments/sample.toml --stage report
    """
    from prbj.experiments.command import run_experiment_command

    root = click.get_current_context().find_root().command
    options: dict[str, Any] = {
        "out": out,
        "only": only,
        "status": status,
        "dry_run": dry_run,
        "progress": progress,
    }
    if status and (dry_run or only):
        stderr_console().print(
            "[bold red]error:[/bold red] --status cannot be combined with --dry-run or --stage"
        )
        sys.exit(2)
    sys.exit(run_experiment_command(experiment_file, ClickCommandLine(root), **options))
