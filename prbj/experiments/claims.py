"""The paper's claims, checked on one experiment: each gets the figure that tests it, its 95% interval, and a
verdict: supported, contradicted, or inconclusive at this sample size (with the pairs `prbj power` says it would
take, where pairs are what is short). A claim whose inputs the experiment lacks is "not tested", saying what is
missing.

Verdict rules, with δ the smallest difference that counts ([claims] in the experiment file):

- (a) the best judge is far below the oracle setting: gap = accuracy(oracle) − accuracy(best fair setting).
  Supported when the interval lies above δ_gap (oracle_gap); contradicted when it lies below it.
- (b) accuracy does not grow with parameter count: Spearman ρ(size, accuracy). Contradicted when the interval
  lies above 0 (it grows); supported when it lies below ρ_min (meaningful_rho).
- (c) the raw profile does not help generic judges: accuracy(profile) − accuracy(none), pooled over judges.
  Contradicted when the interval lies above 0; supported when it lies below δ (smallest_effect).
- (d) planner aspects help: accuracy(planner) − accuracy(none). Supported when the interval lies above 0;
  contradicted when it lies below δ.
- (e) this benchmark ranks RMs closer to their downstream rank than each other benchmark given: Spearman ρ with
  downstream minus the other benchmark's, on the RMs both rank. Supported when the interval lies above 0 for
  every other benchmark; contradicted when it lies below 0 for one.
Anything else is inconclusive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from prbj.analysis.correlate import spearman
from prbj.analysis.power import pairs_needed
from prbj.analysis.stats import ALL_SUBSETS, BOOTSTRAP_RESAMPLES, CONFIDENCE
from prbj.experiments.figures import NONE, Difference, Outcomes, SizeFigure, difference, paired
from prbj.experiments.schema import ClaimSettings

Verdict = Literal["supported", "contradicted", "inconclusive", "not tested"]
PRBJ_COLUMN = "Personalized-RewardBench"


@dataclass(frozen=True)
class Claim:
    key: str
    statement: str
    verdict: Verdict
    figure: str = ""
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    detail: str = ""
    pairs_needed: int | None = None
    missing: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


STATEMENTS = {
    "a": "The best judge's accuracy is far below the oracle setting.",
    "b": "Accuracy does not grow with parameter count.",
    "c": "Showing the raw profile does not help generic judges.",
    "d": "Planner aspects help.",
    "e": "This benchmark ranks RMs closer to their downstream rank than the other benchmarks given.",
}


def _not_tested(key: str, missing: str) -> Claim:
    return Claim(key, STATEMENTS[key], "not tested", missing=missing)


def _above(low: float | None, threshold: float) -> bool:
    return low is not None and low > threshold


def _below(high: float | None, threshold: float) -> bool:
    return high is not None and high < threshold


def _needed(effect: Difference, delta: float) -> int | None:
    return pairs_needed(effect.discordance, delta) if effect.discordance else None


def _claim_from(
    key: str, figure: str, effect: Difference, verdict: Verdict, detail: str, delta: float
) -> Claim:
    return Claim(
        key,
        STATEMENTS[key],
        verdict,
        figure=figure,
        value=effect.difference,
        ci_low=effect.ci_low,
        ci_high=effect.ci_high,
        detail=f"{detail}; {effect.n} pairs",
        pairs_needed=_needed(effect, delta) if verdict == "inconclusive" else None,
    )


def _accuracy(correct: Mapping[str, bool]) -> float:
    return sum(correct.values()) / len(correct) if correct else float("nan")


def oracle_gap(outcomes: Sequence[Outcomes], settings: ClaimSettings, *, seed: int) -> Claim:
    oracle = [o for o in outcomes if o.context == "oracle" and o.correct]
    fair = [o for o in outcomes if o.context not in ("oracle", "swapped-profile") and o.correct]
    if not oracle:
        return _not_tested("a", "no judge ran in the 'oracle' context (add it to a judge's contexts)")
    if not fair:
        return _not_tested("a", "no judge ran in a fair context (none, profile, planner)")
    best = max(fair, key=lambda o: (_accuracy(o.correct), o.entry, o.context))
    same = [o for o in oracle if o.entry == best.entry]
    reference = same[0] if same else max(oracle, key=lambda o: _accuracy(o.correct))
    first, second = paired(reference.correct, best.correct)
    effect = difference(first, second, seed=seed)
    delta = settings.oracle_gap
    verdict: Verdict = (
        "supported"
        if _above(effect.ci_low, delta)
        else "contradicted"
        if _below(effect.ci_high, delta)
        else "inconclusive"
    )
    detail = (
        f"oracle ({reference.entry}) − best fair setting ({best.entry} · {best.context}, "
        f"{_accuracy(best.correct):.1%}); 'far' = more than {delta:.0%}"
    )
    return _claim_from("a", "accuracy gap to the oracle setting", effect, verdict, detail, delta)


def size_trend(figure: SizeFigure, settings: ClaimSettings) -> Claim:
    if len(figure.points) < 3:
        return _not_tested(
            "b",
            f"parameter counts for at least 3 judges (have {len(figure.points)}): set params_b, or use hf: models",
        )
    if figure.spearman is None:
        return _not_tested("b", "Spearman ρ is undefined (every size or every accuracy is the same)")
    rho_min = settings.meaningful_rho
    verdict: Verdict = (
        "contradicted"
        if _above(figure.ci_low, 0.0)
        else "supported"
        if _below(figure.ci_high, rho_min)
        else "inconclusive"
    )
    return Claim(
        "b",
        STATEMENTS["b"],
        verdict,
        figure="Spearman ρ(parameter count, accuracy)",
        value=figure.spearman,
        ci_low=figure.ci_low,
        ci_high=figure.ci_high,
        detail=f"{len(figure.points)} reward models; 'grows' = ρ above {rho_min:g}"
        + ("; more reward models with known sizes would narrow it" if verdict == "inconclusive" else ""),
    )


def pooled_effect(
    outcomes: Sequence[Outcomes], context: str, *, seed: int
) -> tuple[Difference, list[str]] | None:
    """accuracy(context) − accuracy(none) over every judge entry that ran in both: per pair, each side is the
    mean over those judges; the interval resamples pairs."""
    by_entry: dict[str, dict[str, Mapping[str, bool]]] = {}
    for o in outcomes:
        by_entry.setdefault(o.entry, {})[o.context] = o.correct
    sides: dict[str, tuple[list[float], list[float]]] = {}
    entries = []
    for entry, contexts in by_entry.items():
        if context in contexts and NONE in contexts:
            entries.append(entry)
            for pair_id in sorted(contexts[context].keys() & contexts[NONE].keys()):
                with_context, without = sides.setdefault(pair_id, ([], []))
                with_context.append(float(contexts[context][pair_id]))
                without.append(float(contexts[NONE][pair_id]))
    if not sides:
        return None
    first = np.array([np.mean(f) for f, _ in sides.values()])
    second = np.array([np.mean(s) for _, s in sides.values()])
    effect = difference(first, second, seed=seed)
    rows_first = np.concatenate([np.array(f) for f, _ in sides.values()])
    rows_second = np.concatenate([np.array(s) for _, s in sides.values()])
    psi = float(np.mean(rows_first != rows_second))
    return Difference(effect.n, effect.difference, effect.ci_low, effect.ci_high, psi), entries


def _context_claim(
    key: str, context: str, outcomes: Sequence[Outcomes], settings: ClaimSettings, *, seed: int, helps: bool
) -> Claim:
    """Claim `key` about `context` against `none`: that it helps (`helps`), or that it does not."""
    pooled = pooled_effect(outcomes, context, seed=seed)
    if pooled is None:
        hint = " (add a [planner])" if context == "planner" else ""
        return _not_tested(key, f"no judge ran in both the '{context}' and 'none' contexts{hint}")
    effect, entries = pooled
    delta = settings.smallest_effect
    helped, did_not = _above(effect.ci_low, 0.0), _below(effect.ci_high, delta)
    verdict: Verdict = "inconclusive"
    if helped:
        verdict = "supported" if helps else "contradicted"
    elif did_not:
        verdict = "contradicted" if helps else "supported"
    detail = f"{context} − none over {len(entries)} judge(s) ({', '.join(entries)}); 'helps' = more than {delta:.0%}"
    return _claim_from(key, f"accuracy with {context} − without", effect, verdict, detail, delta)


def profile_helps(outcomes: Sequence[Outcomes], settings: ClaimSettings, *, seed: int) -> Claim:
    return _context_claim("c", "profile", outcomes, settings, seed=seed, helps=False)


def planner_helps(outcomes: Sequence[Outcomes], settings: ClaimSettings, *, seed: int) -> Claim:
    return _context_claim("d", "planner", outcomes, settings, seed=seed, helps=True)


def _rho_difference(
    ours: np.ndarray, theirs: np.ndarray, downstream: np.ndarray, *, seed: int
) -> tuple[float, float | None, float | None]:
    value = float(spearman(ours, downstream) - spearman(theirs, downstream))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, ours.size, size=(BOOTSTRAP_RESAMPLES, ours.size))
    diffs = spearman(ours[picks], downstream[picks]) - spearman(theirs[picks], downstream[picks])
    finite = diffs[np.isfinite(diffs)]
    if not finite.size:
        return value, None, None
    alpha = (1.0 - CONFIDENCE) / 2.0
    low, high = np.quantile(finite, [alpha, 1.0 - alpha])
    return value, float(low), float(high)


def ranks_closer(comparisons: Sequence[Mapping[str, Any]], *, seed: int) -> Claim:
    """From correlation.json's comparisons: per downstream table over all subsets, this benchmark's column
    against every other benchmark's, on the RMs both rank."""
    tables: dict[tuple[Any, ...], dict[str, Mapping[str, Any]]] = {}
    for c in comparisons:
        if c.get("subset") == ALL_SUBSETS:
            tables.setdefault((c["source"], c["subset"], c["k"]), {})[str(c["benchmark"])] = c
    found = []
    for (source, _, k), columns in sorted(tables.items(), key=lambda kv: str(kv[0])):
        ours = columns.get(PRBJ_COLUMN)
        if ours is None:
            continue
        mine = {r["rm"]: (r["benchmark"], r["downstream"]) for r in ours["rms"]}
        for name, other in sorted(columns.items()):
            if name == PRBJ_COLUMN:
                continue
            theirs = {r["rm"]: r["benchmark"] for r in other["rms"]}
            shared = sorted(mine.keys() & theirs.keys())
            if len(shared) < 3:
                continue
            value, low, high = _rho_difference(
                np.array([mine[r][0] for r in shared]),
                np.array([theirs[r] for r in shared]),
                np.array([mine[r][1] for r in shared]),
                seed=seed,
            )
            found.append(
                {
                    "source": source,
                    "k": k,
                    "benchmark": name,
                    "rms": len(shared),
                    "value": value,
                    "ci_low": low,
                    "ci_high": high,
                }
            )
    if not found:
        return _not_tested(
            "e",
            "a downstream correlation of this benchmark and at least one other benchmark on 3 or more shared RMs "
            "([downstream] benchmarks, and BoN or PPO outcomes)",
        )
    if any(_below(f["ci_high"], 0.0) for f in found):
        verdict: Verdict = "contradicted"
    elif all(_above(f["ci_low"], 0.0) for f in found):
        verdict = "supported"
    else:
        verdict = "inconclusive"
    worst = min(found, key=lambda f: f["value"])
    return Claim(
        "e",
        STATEMENTS["e"],
        verdict,
        figure="Spearman ρ with downstream: this benchmark − another",
        value=worst["value"],
        ci_low=worst["ci_low"],
        ci_high=worst["ci_high"],
        detail=f"closest contest: {worst['benchmark']} on {worst['source']} (k={worst['k']}), {worst['rms']} RMs"
        + ("; more RMs would narrow it" if verdict == "inconclusive" else ""),
        extra={"comparisons": found},
    )


def check_claims(
    outcomes: Sequence[Outcomes],
    size: SizeFigure,
    comparisons: Sequence[Mapping[str, Any]],
    settings: ClaimSettings,
    *,
    seed: int,
) -> list[Claim]:
    return [
        oracle_gap(outcomes, settings, seed=seed),
        size_trend(size, settings),
        profile_helps(outcomes, settings, seed=seed),
        planner_helps(outcomes, settings, seed=seed),
        ranks_closer(comparisons, seed=seed),
    ]
