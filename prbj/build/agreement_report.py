"""The human-evaluation table of a build (the paper's layout), as Rich tables and as agreement.md."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from prbj.build.checks import CHECK_JUDGE, DIMENSIONS

_COLUMNS = (*DIMENSIONS, "preference")
# Short headers keep both tables within 80 columns.
_SHORT = {
    "factuality": "fact.",
    "relevance": "relev.",
    "helpfulness": "help.",
    "adherence": "adher.",
    "preference": "pref.",
    "preferred": "pref.",
}


def _number(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _mean_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for rater in ("annotators", CHECK_JUDGE):
        block = report["means"][rater]
        for answer in ("chosen", "rejected"):
            share = block["preference"][answer]
            rows.append(
                [
                    rater,
                    answer,
                    *(_number(block[answer][d]) for d in DIMENSIONS),
                    "—" if share is None else f"{100 * share:.0f}%",
                ]
            )
    return rows


def _kappa_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for group in ("between_annotators", "annotator_vs_check_model"):
        for entry in report["kappa"][group]:
            rows.append(
                [f"{entry['a']} vs {entry['b']}", str(entry["n_pairs"])]
                + [_number(entry[c], 3) for c in _COLUMNS]
            )
    return rows


def agreement_tables(report: dict[str, Any]) -> list[Table]:
    means = Table(
        title=f"Human evaluation ({report['n_pairs']} pairs): mean rating 1-5, share preferred",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    for name in ("rater", "answer", *DIMENSIONS, "preferred"):
        means.add_column(
            _SHORT.get(name, name), justify="left" if name in ("rater", "answer") else "right", no_wrap=True
        )
    for row in _mean_rows(report):
        means.add_row(*row)
    kappa = Table(
        title="Cohen's κ (quadratic-weighted for ratings, unweighted for the preference)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    for name in ("raters", "pairs", *_COLUMNS):
        kappa.add_column(
            _SHORT.get(name, name), justify="left" if name == "raters" else "right", no_wrap=name != "raters"
        )
    for row in _kappa_rows(report):
        kappa.add_row(*row)
    return [means, kappa]


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def agreement_markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Human evaluation",
        "",
        f"{report['n_pairs']} pairs rated by {len(report['sheets'])} annotator(s): "
        + ", ".join(f"{sheet} (`{path}`)" for sheet, path in report["sheets"].items())
        + ".",
        "",
        "## Mean ratings (1-5) and share of pairs where the answer was preferred",
        "",
        *_markdown_table(["rater", "answer", *DIMENSIONS, "preferred"], _mean_rows(report)),
        "",
        "## Agreement (Cohen's κ)",
        "",
        "Ratings: quadratic-weighted κ over both answers of every shared pair; preference: unweighted κ over "
        "chosen / rejected / tie. The check model prefers the answer with the higher adherence score; on kept "
        "pairs that is always the chosen one, so its preference κ is 0 or undefined (—) by construction.",
        "",
        *_markdown_table(["raters", "pairs", *_COLUMNS], _kappa_rows(report)),
        "",
    ]
    return "\n".join(lines)
