"""`prbj power` behind the CLI: from a run's judgments, how many pairs it takes to tell its judges apart."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from prbj.analysis.compare import compare_judges, power_rows
from prbj.analysis.power import ALPHA, POWER
from prbj.display.fit import FittingTable
from prbj.display.width import output_console
from prbj.errors import DataError
from prbj.report import fmt
from prbj.runs import rundir


def run_power_command(baseline: Path, *, delta: float, output_format: str = "table") -> int:
    """Print, per pair of judges in the run, the observed discordance, the pairs needed to detect `delta`
    (α = 0.05, 80% power) and the minimum detectable difference at the run's size."""
    run = rundir.load_run(baseline)
    seed = int(run.summary.get("seed", 42) or 42)
    comparisons = compare_judges(run.judgments, seed=seed)
    if not comparisons:
        raise DataError(f"{baseline}: the run holds fewer than two judges on the same pairs")
    rows = power_rows(comparisons, delta=delta)
    if output_format == "json":
        print(json.dumps({"alpha": ALPHA, "power": POWER, "delta": delta, "pairs": rows}, indent=2))
        return 0
    table = Table(
        title=f"Pairs needed to detect a {100 * delta:.1f}-point difference (α={ALPHA}, power={POWER:.0%})"
    )
    clustered = any("design_effect" in row for row in rows)
    headers = ["first", "second", "pairs now", *(["users", "design effect"] if clustered else [])]
    for header in (*headers, "discordant %", "difference (pp)", "pairs needed", "MDE now (pp)"):
        table.add_column(header, justify="left" if header in ("first", "second") else "right")
    for row in rows:
        users = [
            str(row.get("users", fmt.DASH)),
            f"{row['design_effect']:.2f}" if "design_effect" in row else "1",
        ]
        table.add_row(
            row["first"],
            row["second"],
            str(row["n"]),
            *(users if clustered else []),
            fmt.percent(row["discordance"]),
            fmt.points(row["difference"]),
            fmt.DASH if row["pairs_needed"] is None else str(row["pairs_needed"]),
            fmt.percent(row["min_detectable_difference"]),
        )
    console = output_console()
    console.print(FittingTable(table, key_columns=2))
    console.print(
        "pairs needed: McNemar's test on paired verdicts, from the observed share of pairs on which the two "
        "judges disagree about correctness (— when that share is smaller than the difference). MDE now: the "
        "smallest difference detectable with the run's pairs."
        + (
            " Users have several pairs here: pairs needed are multiplied by the design effect (how much a "
            "user's pairs moving together inflates the variance of the difference) and the MDE is taken at "
            "pairs ÷ design effect."
            if clustered
            else ""
        ),
        highlight=False,
    )
    return 0
