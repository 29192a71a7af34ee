"""The options of `prbj judge` that ask how sure the judges are; their meaning is in docs/confidence.md
"How sure is the judge?"."""

from __future__ import annotations

from pathlib import Path

import click

from prbj.cli.options import stacked

confidence_options = stacked(
    click.option(
        "--confidence",
        type=click.Choice(["logprobs", "available"]),
        default=None,
        help="Give every judgment a probability (p_chosen, confidence) and report calibration (ECE, Brier, "
        "AUROC, accuracy-coverage). logprobs: LLM judges also return the verdict token's log-probabilities "
        "(part of the cache key); available: only what the run has anyway (both orders, samples, scores).",
    ),
    click.option(
        "--selective",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        metavar="FILE",
        help="selective.json from `prbj calibrate`: verdicts below a judge's threshold become 'abstained' "
        "(counted apart); reports coverage, kept accuracy and whether the target held on held-out pairs.",
    ),
    click.option(
        "--escalate-to",
        default=None,
        metavar="PROVIDER",
        help="Cascade: pairs a judge is unsure of (below --escalate-below, or withheld by --selective) are "
        "judged again by PROVIDER; reported as cascade(judge→PROVIDER) beside PROVIDER alone.",
    ),
    click.option(
        "--escalate-below",
        type=click.FloatRange(0, 1),
        default=None,
        metavar="CONF",
        help="With --escalate-to: escalate judgments whose confidence is below CONF (and those without one).",
    ),
)
"""--confidence, --selective, --escalate-to, --escalate-below."""
