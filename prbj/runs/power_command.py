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
    (α = 0.05, 80% power), the users needed where users repeat, and the minimum detectable difference at the
    run's size."""
    run = rundir.load_run(baseline)
    seed = int(run.summary.get("seed", 42) or 42)
    comparisons = compare_judges(run.judgments, seed=seed)
    if not comparisons:
        raise DataError(f"{baseline}: the run holds fewer than two judges on the same pairs")
    rows = power_rows(comparisons, delta=delta)
    if output_format == "json":
        print(json.dumps({"alpha": ALPHA, "power": POWER, "delta": delta, "pairs": rows}, indent=2))
        return 0
    clustered = any("users_needed" in row for row in rows)
    unit = "Users" if clustered else "Pairs"
    table = Table(
        title=f"{unit} needed to detect a {100 * delta:.1f}-point difference (α={ALPHA}, power={POWER:.0%})"
    )
    headers = ["first", "second", "pairs now"]
    if clustered:
        headers += ["users now", "design effect (upper 80%)", "users needed"]
    for header in (*headers, "discordant %", "difference (pp)", "pairs needed", "MDE now (pp)"):
        table.add_column(header, justify="left" if header in ("first", "second") else "right")
    for row in rows:
        cells = [row["first"], row["second"], str(row["n"])]
        if clustered:
            cells += (
                [
                    str(row["users"]),
                    f"{row['design_effect']:.2f} ({row['design_effect_upper']:.2f})",
                    fmt.DASH if row["users_needed"] is None else str(row["users_needed"]),
                ]
                if "users_needed" in row
                else [fmt.DASH, "1", fmt.DASH]
            )
        table.add_row(
            *cells,
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
            " Users have several pairs here, so a new study is planned in users: users needed = the pairs "
            "independent pairs would need × the design effect (how much a user's pairs moving together "
            "inflate the variance of the difference; planned at the upper 80% of its values over 2,000 user "
            "resamples of this run, the point value in front) ÷ the pairs per user, with Student's t over "
            "users; pairs needed = what those users bring. Assumed: new users are drawn like these, bring as "
            "many pairs each on average, and the judges disagree on them as on these. The MDE is taken at "
            "pairs ÷ design effect."
            if clustered
            else ""
        ),
        highlight=False,
    )
    return 0
