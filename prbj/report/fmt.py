"""Number formats shared by every table prbj prints or writes (the leaderboard of `prbj judge`, the terminal,
Markdown and HTML reports, `prbj check`), so they all print the same figure the same way."""

from __future__ import annotations

from prbj.analysis.stats import ALL_SUBSETS, GroupStats
from prbj.data.per_user import DEFAULT_SUBSET

NA = "n/a"
DASH = "—"

# The official names are long; a terminal column needs a short header.
SHORT_SUBSET = {
    "Art_and_Entertainment": "A&E",
    "Lifestyle_and_Personal_Development": "L&PD",
    "Society_and_Culture": "S&C",
}

# Report headers have more room than terminal columns: shorter than the official names, still readable.
REPORT_SUBSET = {
    "Art_and_Entertainment": "Art & Entertainment",
    "Lifestyle_and_Personal_Development": "Lifestyle & Personal Dev.",
    "Society_and_Culture": "Society & Culture",
}


def short_subset(subset: str, *, terse: bool = False) -> str:
    """A subset's column or panel name; `terse` for terminal columns."""
    if subset == ALL_SUBSETS:
        return "overall"
    return (SHORT_SUBSET if terse else REPORT_SUBSET).get(subset, subset)


def subset_columns(subsets: set[str]) -> list[str]:
    """The subsets a table gives a column (or a chart a panel) of their own, beside the overall figure: not the
    implicit subset of per-user data that names none (`default`) when it is the only one: its column would repeat
    the overall figure under a name nobody chose."""
    named = sorted(subsets - {ALL_SUBSETS})
    return [] if named == [DEFAULT_SUBSET] else named


def percent(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{100 * value:.{digits}f}"


def percent_sign(value: float | None) -> str:
    """ "61.0%" in running text; a dash alone for nothing."""
    return DASH if value is None else f"{percent(value)}%"


def points(value: float | None) -> str:
    """A signed difference in percentage points."""
    if value is None:
        return DASH
    rounded = round(100 * value, 1)
    # A difference that rounds to zero is zero, not "-0.0".
    return "0.0" if rounded == 0 else f"{rounded:+.1f}"


def span(low: float | None, high: float | None) -> str:
    """A 95% interval in percent, "low–high"."""
    if low is None or high is None:
        return DASH
    return f"{percent(low)}–{percent(high)}"


def interval(row: GroupStats) -> str:
    """A row's 95% interval of pair accuracy in percent, "low–high"."""
    return span(row.ci_low, row.ci_high)


def with_span(value: float | None, low: float | None, high: float | None) -> str:
    """ "61.0 (55.2–66.8)"; the figure alone when it has no interval."""
    if value is None:
        return DASH
    if low is None or high is None:
        return percent(value)
    return f"{percent(value)} ({span(low, high)})"


def accuracy_with_ci(row: GroupStats | None) -> str:
    if row is None:
        return DASH
    return with_span(row.accuracy, row.ci_low, row.ci_high)


def user_accuracy_with_ci(row: GroupStats | None) -> str:
    """User accuracy (mean over users of each user's accuracy) with its interval over users."""
    if row is None:
        return DASH
    return with_span(row.user_accuracy, row.user_ci_low, row.user_ci_high)


def failed_of(failed: int, n: int) -> str:
    return f"{failed}/{n}"


def usd(value: float | None) -> str:
    if value is None:
        return NA
    if value == 0:
        return "$0"
    return f"${value:.4f}" if value < 0.01 else f"${value:.2f}"


def seconds(value: float | None) -> str:
    return NA if value is None else f"{value:.2f} s"


def p_value(value: float | None) -> str:
    if value is None:
        return DASH
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def cell(value: object) -> str:
    """A table cell of free type: a dash for nothing, four decimals for a float, text for the rest."""
    if value is None:
        return DASH
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def correlation(value: float | None) -> str:
    return NA if value is None else f"{value:+.3f}"
