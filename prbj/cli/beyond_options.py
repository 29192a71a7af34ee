"""The options of `prbj judge` that measure beyond accuracy; their meaning is in docs/reports.md "Beyond accuracy"."""

from __future__ import annotations

import click

from prbj.analysis.slice_kinds import SLICE_KINDS
from prbj.cli.options import stacked

slice_option = click.option(
    "--slice",
    "slices",
    multiple=True,
    type=click.Choice([*SLICE_KINDS, "all"]),
    help="Accuracy by slice with 95% CIs (repeatable): profile-posts, profile-tokens, length-diff (quantile "
    "bins), subset, aspects (rubric-aspect count), or all.",
)

beyond_options = stacked(
    click.option(
        "--samples",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        metavar="K",
        help="Ask each LLM judgment K times (at the profile's temperature, or --temperature) and report "
        "agreement and majority-vote accuracy; accuracy stays that of the first sample. In-process hf-local "
        "judges decode greedily and are asked once.",
    ),
    click.option(
        "--temperature",
        type=click.FloatRange(min=0, max=2),
        default=None,
        metavar="T",
        help="Sampling temperature of the LLM judges' calls for this run [default: the profile's]; part of the "
        "cache key, so answers at another temperature are asked anew.",
    ),
    click.option(
        "--jury",
        multiple=True,
        metavar="NAME=J1,J2,J3",
        help="Add a judge whose verdict is the majority of these judges' verdicts per pair (repeatable; the "
        "members must be among --provider; costs no extra call).",
    ),
    slice_option,
    click.option(
        "--compare",
        is_flag=True,
        help="Compare every two judges on the same pairs: paired bootstrap of the difference, McNemar p with "
        "Holm correction, minimum detectable difference (summary.json 'comparisons').",
    ),
)
"""--samples, --temperature, --jury, --slice, --compare."""
