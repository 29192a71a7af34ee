"""report.md of a build and the Rich table printed at its end, both read from build_summary.json's content."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from prbj.build.checks import DIMENSIONS
from prbj.data.status import STATUS_MEANING, UNANSWERED_STATUSES
from prbj.report.fmt import SHORT_SUBSET

REASON_TEXT: dict[str, str] = {
    "planner_no_aspects": "the planner gave no aspects",
    "no_gold_aspects": "the record has no gold rubric aspects",
    "empty_chosen": "the chosen answer is empty",
    "empty_rejected": "the rejected answer is empty",
    "identical_answers": "chosen and rejected are the same text",
    "chosen_too_long": "the chosen answer exceeds --max-words",
    "rejected_too_long": "the rejected answer exceeds --max-words",
    "check_parse_error": "a check reply could not be read",
    **{
        f"{step}_{status}": f"the {step} reply {meaning}"
        for step in ("planner", "chosen", "rejected", "check")
        for status, meaning in (
            ("truncated", "reached its output cap"),
            ("refused", "was refused by the provider"),
        )
    },
    "low_quality_chosen": "the chosen answer scored below --min-quality",
    "low_quality_rejected": "the rejected answer scored below --min-quality",
    "small_adherence_gap": "adherence gap below --min-gap",
    # A build step whose call got no answer is dropped for the call's status.
    **{status: STATUS_MEANING[status] for status in UNANSWERED_STATUSES},
}


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def length_note(length: dict[str, Any]) -> str | None:
    share = length["chosen_longer_share"]
    if share is None:
        return None
    note = (
        f"The chosen answer is longer in {share:.0%} of kept pairs ({length['chosen_longer']} of "
        f"{length['kept_pairs']}; mean {length['mean_words_chosen']} vs {length['mean_words_rejected']} words)."
    )
    if length["warning"]:
        note += (
            f" That is above {length['warning_share']:.0%}: a judge that simply prefers longer answers would "
            "score well on these pairs. Consider regenerating with a lower --max-words or a generator that "
            "writes to length."
        )
    return note


def markdown(summary: dict[str, Any]) -> str:
    counts, source = summary["counts"], summary["input"]
    lines = [
        "# Build report",
        "",
        f"Input: `{source['source']}` ({source['n_records']} records, fingerprint `{source['fingerprint']}`). "
        f"Plan: {summary['settings']['plan']}. Kept {counts['kept']}, dropped {counts['dropped']}, "
        f"incomplete {counts['incomplete']}.",
        "",
        f"Thresholds: answers ≤ {summary['settings']['max_words']} words; factuality, relevance and helpfulness "
        f"≥ {summary['settings']['min_quality']:g} for both answers; adherence(chosen) − adherence(rejected) "
        f"≥ {summary['settings']['min_gap']:g}.",
        "",
        "## Models",
        "",
    ]
    model_rows = [
        [role, described.get("provider", described.get("source", "")), described.get("model", "")]
        for role, described in summary["models"].items()
    ]
    lines += _table(["step", "provider", "model"], model_rows)
    lines += ["", "## Pairs per subset", ""]
    subset_rows = [
        [subset, c["records"], c["kept"], c["dropped"], c["incomplete"]]
        for subset, c in summary["by_subset"].items()
    ]
    subset_rows.append(["all", counts["records"], counts["kept"], counts["dropped"], counts["incomplete"]])
    lines += _table(["subset", "records", "kept", "dropped", "incomplete"], subset_rows)
    reasons = {**counts["drop_reasons"], **counts["incomplete_reasons"]}
    if reasons:
        subsets = list(summary["by_subset"])
        lines += ["", "## Why pairs were not kept", ""]
        rows = []
        for reason, n in reasons.items():
            per_subset = [
                summary["by_subset"][s]["drop_reasons"].get(reason)
                or summary["by_subset"][s]["incomplete_reasons"].get(reason)
                or 0
                for s in subsets
            ]
            rows.append([f"`{reason}`", REASON_TEXT.get(reason, ""), n, *per_subset])
        lines += _table(["reason", "meaning", "total", *subsets], rows)
    lines += ["", "## Check scores", ""]
    for label, key in (("Kept pairs", "kept"), ("All checked pairs", "all_checked")):
        block = summary["scores"][key]
        lines += [f"{label} (n = {block['n']}): mean and count of each rating 1-5.", ""]
        rows = []
        for role in ("chosen", "rejected"):
            for dimension in DIMENSIONS:
                dist = block[role][dimension]
                rows.append(
                    [role, dimension, dist["mean"], *(dist["histogram"].get(str(v), 0) for v in range(1, 6))]
                )
        lines += [*_table(["answer", "dimension", "mean", "1", "2", "3", "4", "5"], rows), ""]
        gap = block["adherence_gap"]
        if gap["n"]:
            spread = ", ".join(f"{k}: {v}" for k, v in gap["histogram"].items())
            lines += [f"Adherence gap (chosen − rejected): mean {_cell(gap['mean'])}; {spread}.", ""]
    lines += ["## Length", ""]
    note = length_note(summary["length"])
    lines += [note or "No kept pairs.", ""]
    return "\n".join(lines)


def outcome_table(summary: dict[str, Any]) -> Table:
    table = Table(title="Build", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for name in ("subset", "records", "kept", "dropped", "incomplete"):
        table.add_column(name, justify="left" if name == "subset" else "right", no_wrap=True)
    table.add_column("reasons", overflow="fold")
    rows = [*summary["by_subset"].items(), ("all", summary["counts"])]
    for subset, c in rows:
        reasons = {**c["drop_reasons"], **c["incomplete_reasons"]}
        table.add_row(
            SHORT_SUBSET.get(subset, subset),
            str(c["records"]),
            str(c["kept"]),
            str(c["dropped"]),
            str(c["incomplete"]),
            ", ".join(f"{r} {n}" for r, n in reasons.items()),
        )
    return table
