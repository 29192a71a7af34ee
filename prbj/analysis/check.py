"""`prbj check`: a regression gate comparing a run with a baseline, for CI.

For every judge × context × subset in the baseline (subset `all` included):
- accuracy: FAIL when it dropped by more than the tolerance AND McNemar's paired test on the items both runs
  judged says the drop is significant at alpha; WARN (and pass) when it dropped beyond the tolerance but
  the test cannot tell the drop from noise;
- failures: FAIL when the share of judgments that failed (parse or API error, budget skip) exceeds the bound.
For the run as a whole, FAIL when its spend exceeds the cost bound.
Where users repeat in the run (a per-user benchmark), the paired test is over users
(prbj.analysis.mcnemar.clustered_test: Obuchowski's clustered McNemar from 50 users, the exact sign-flip test
under that): a user's pairs flip together more often than independent pairs would. With too few users for any
outcome to reach alpha (the sign-flip test needs 6 users with a difference at alpha 0.05), the test cannot tell a
regression from noise, so it does not decide: a drop beyond the tolerance FAILs on the tolerance alone, and the
reason says so.
A baseline group missing from the run, or a baseline made on other data, is a data error (exit 2), not a pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from prbj.analysis.baseline import Baseline, GroupKey, Outcomes, item_outcomes, spent_usd
from prbj.analysis.check_headline import (
    Scores,
    gates_on_headline,
    headline_scores,
    headline_test,
    of_pairs,
    pair_of,
)
from prbj.analysis.headline import Headline, headline_of
from prbj.analysis.mcnemar import McNemarResult, paired_test
from prbj.analysis.run_data import RunData
from prbj.analysis.stats import ALL_SUBSETS, GroupStats
from prbj.analysis.user_counts import users_of_pairs, users_repeat
from prbj.data.loaders import match_subset
from prbj.errors import DataError

Status = Literal["pass", "warn", "fail"]
EXIT_PASS = 0
EXIT_REGRESSION = 1


@dataclass(frozen=True)
class CheckSettings:
    tolerance_points: float = 2.0
    alpha: float = 0.05
    max_error_rate: float | None = 0.05
    max_cost_usd: float | None = None
    judges: tuple[str, ...] = ()
    subsets: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupCheck:
    judge: str
    context: str
    subset: str
    baseline_accuracy: float | None
    accuracy: float | None
    delta_points: float | None
    paired_items: int
    lost: int
    gained: int
    p_value: float
    test: str
    error_rate: float | None
    status: Status
    reasons: list[str] = field(default_factory=list)
    # The figure gated (the run's headline, prbj.analysis.headline): `accuracy` over pairs, or `users`,
    # `judgments`, `official` (prbj.analysis.check_headline); baseline_accuracy and accuracy hold its values.
    figure: str = "accuracy"


@dataclass(frozen=True)
class CheckReport:
    run: str
    baseline: str
    settings: CheckSettings
    groups: list[GroupCheck]
    spent_usd: float | None
    failures: list[str]
    warnings: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return EXIT_PASS if self.passed else EXIT_REGRESSION

    def as_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "exit_code": self.exit_code,
            "run": self.run,
            "baseline": self.baseline,
            "settings": asdict(self.settings),
            "spent_usd": self.spent_usd,
            "failures": self.failures,
            "warnings": self.warnings,
            "groups": [asdict(g) for g in self.groups],
        }


def group_label(judge: str, context: str, subset: str) -> str:
    return f"judge {judge!r} (context {context}) on subset {subset!r}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _error_rate(row: GroupStats) -> float | None:
    if not row.n:
        return None
    # Everything not "ok": parse and API errors, budget and cache skips, statuses added later alike.
    return (row.n - (row.n_ok or 0)) / row.n


def _known_outcomes(outcomes: Outcomes, keys: set[str] | None) -> dict[str, bool]:
    return {k: v for k, v in outcomes.items() if v is not None and (keys is None or k in keys)}


def check_group(
    base: GroupStats,
    current: GroupStats,
    base_items: Outcomes,
    run_items: Outcomes,
    subset_keys: set[str] | None,
    settings: CheckSettings,
    users: dict[str, str] | None = None,
) -> GroupCheck:
    """`users`: item key → user when users repeat in the run."""
    paired, test = paired_test(
        _known_outcomes(base_items, subset_keys), _known_outcomes(run_items, subset_keys), users
    )
    return _gate(base, current, (base.accuracy, current.accuracy), paired, test, settings)


def _gate(
    base: GroupStats,
    current: GroupStats,
    values: tuple[float | None, float | None],
    paired: int,
    test: McNemarResult,
    settings: CheckSettings,
    figure: str = "accuracy",
) -> GroupCheck:
    """The verdict on one judge × context × subset, whatever the figure gated (`values`: its baseline and run
    values) and the paired test of its change (on `paired` items)."""
    before, after = values
    delta = None if before is None or after is None else 100.0 * (after - before)
    status: Status = "pass"
    reasons: list[str] = []
    label = group_label(base.judge, base.context, base.subset)
    if after is None and before is not None:
        status = "fail"
        reasons.append(
            f"{label}: no successful judgments (baseline accuracy {_pct(before)})"
            if figure == "accuracy"
            else f"{label}: no {figure} figure (baseline {_pct(before)})"
        )
    elif delta is not None and delta < -settings.tolerance_points:
        change = (
            f"{label}: {figure} {_pct(before)} → {_pct(after)} ({delta:+.1f} pts, "
            f"tolerance {settings.tolerance_points:g}); {test.describe()}"
        )
        if not test.can_reject(settings.alpha):
            status = "fail"
            reasons.append(
                f"{change}: too few users to test (on these {test.clusters} users the smallest p-value the "
                f"test can give is {test.floor:.3g}, not below alpha {settings.alpha:g}), so the drop beyond "
                "the tolerance fails on the tolerance alone"
            )
        elif test.p_value < settings.alpha:
            status = "fail"
            reasons.append(f"{change} < alpha {settings.alpha:g}")
        else:
            status = "warn"
            reasons.append(f"{change} ≥ alpha {settings.alpha:g}: not significant, passing")
    error_rate = _error_rate(current)
    if (
        settings.max_error_rate is not None
        and error_rate is not None
        and error_rate > settings.max_error_rate
    ):
        status = "fail"
        reasons.append(
            f"{label}: {_pct(error_rate)} of judgments failed (bound {_pct(settings.max_error_rate)})"
        )
    return GroupCheck(
        judge=base.judge,
        context=base.context,
        subset=base.subset,
        baseline_accuracy=before,
        accuracy=after,
        delta_points=delta,
        paired_items=paired,
        lost=test.lost,
        gained=test.gained,
        p_value=test.p_value,
        test=test.method,
        error_rate=error_rate,
        status=status,
        reasons=reasons,
        figure=figure,
    )


def _selected(baseline: Baseline, settings: CheckSettings) -> list[GroupStats]:
    rows = baseline.results
    if settings.judges:
        known = {r.judge for r in rows}
        for judge in settings.judges:
            if judge not in known:
                raise DataError(f"--judge {judge!r}: not in the baseline; it has {', '.join(sorted(known))}")
        rows = [r for r in rows if r.judge in settings.judges]
    if settings.subsets:
        available = list(dict.fromkeys(r.subset for r in baseline.results))
        wanted = {match_subset(name, available, within="the baseline") for name in settings.subsets}
        rows = [r for r in rows if r.subset in wanted]
    return rows


def item_users(by_pair: dict[str, str], keys: set[str]) -> dict[str, str]:
    """Item key → user for these items (`by_pair`: pair id → user, prbj.analysis.user_counts.users_of_pairs). An
    item key is its pair id, or the pair id and a `#` suffix when a judge saw the pair more than once."""
    return {key: by_pair.get(key) or by_pair.get(pair_of(key), key) for key in keys}


def _headline_check(
    base: GroupStats,
    current: GroupStats,
    items: tuple[Scores, Scores],
    users: dict[str, str],
    settings: CheckSettings,
    headline: Headline,
    seed: int,
) -> GroupCheck:
    """The gate on a headline other than accuracy over pairs (prbj.analysis.check_headline): the same verdict, on
    the sign-flip test over users of the headline's change."""
    paired, test = headline_test(items, users, headline, seed=seed)
    values = (headline.value(base), headline.value(current))
    return _gate(base, current, values, paired, test, settings, figure=headline.short)


def _same_headline(run: RunData, baseline: Baseline, baseline_path: str) -> Headline:
    """The headline both gate on; a baseline that ranked by another figure cannot judge this run."""
    headline = headline_of(run.summary)
    if headline != baseline.headline:
        raise DataError(
            f"{run.run_dir}: its headline is {headline.short} ({headline.name}), the baseline's "
            f"{baseline.headline.short} ({baseline_path}): write a new baseline with --update-baseline"
        )
    return headline


def _seed(baseline: Baseline) -> int:
    return baseline.seed if isinstance(baseline.seed, int) and not isinstance(baseline.seed, bool) else 0


def check_run(
    run: RunData, baseline: Baseline, settings: CheckSettings, *, baseline_path: str
) -> CheckReport:
    base_print = baseline.dataset.get("fingerprint")
    run_print = run.dataset.get("fingerprint")
    if base_print and run_print and base_print != run_print:
        raise DataError(
            f"{run.run_dir}: dataset fingerprint {run_print} differs from the baseline's {base_print} "
            f"({baseline_path}): the runs judged different pairs; write a new baseline with --update-baseline"
        )
    run_rows = {(r.judge, r.context, r.subset): r for r in run.results}
    run_outcomes, run_items = item_outcomes(run.judgments)
    # Where users repeat, the paired test is over users (else items are independent).
    repeat = users_repeat(run.judgments)
    headline = _same_headline(run, baseline, baseline_path)
    on_headline = gates_on_headline(headline, repeat)
    pair_users = users_of_pairs(run.judgments) if repeat or on_headline else {}
    users = item_users(pair_users, set(baseline.items) | set(run_items)) if repeat else None
    run_scores = headline_scores(run.judgments, headline) if on_headline else {}
    keys_by_subset: dict[str, set[str]] = {}
    for key, subset in baseline.items.items():
        keys_by_subset.setdefault(subset, set()).add(key)
    groups: list[GroupCheck] = []
    for base in _selected(baseline, settings):
        current = run_rows.get((base.judge, base.context, base.subset))
        if current is None:
            raise DataError(
                f"{run.run_dir}: {group_label(base.judge, base.context, base.subset)} is in the baseline "
                f"{baseline_path} but not in the run"
            )
        group_key: GroupKey = (base.judge, base.context)
        subset_keys = None if base.subset == ALL_SUBSETS else keys_by_subset.get(base.subset, set())
        if on_headline:
            pairs = None if subset_keys is None else {pair_of(key) for key in subset_keys}
            items = (
                of_pairs(baseline.scores(group_key), pairs),
                of_pairs(run_scores.get(group_key, {}), pairs),
            )
            groups.append(
                _headline_check(base, current, items, pair_users, settings, headline, _seed(baseline))
            )
            continue
        groups.append(
            check_group(
                base,
                current,
                baseline.outcomes.get(group_key, {}),
                run_outcomes.get(group_key, {}),
                subset_keys,
                settings,
                users,
            )
        )
    failures = [reason for g in groups if g.status == "fail" for reason in g.reasons]
    warnings = [reason for g in groups if g.status == "warn" for reason in g.reasons]
    checked = {(r.judge, r.context) for r in baseline.results}
    for judge, context in dict.fromkeys((r.judge, r.context) for r in run.results):
        if (judge, context) not in checked and not settings.judges:
            warnings.append(f"judge {judge!r} (context {context}) is not in the baseline: not checked")
    spent = spent_usd(run.judgments)
    if settings.max_cost_usd is not None:
        if spent is None:
            warnings.append("the run recorded no cost (no cost_usd column): --max-cost not checked")
        elif spent > settings.max_cost_usd:
            failures.append(f"the run spent ${spent:.4f}, above --max-cost ${settings.max_cost_usd:g}")
    return CheckReport(
        run=str(run.run_dir),
        baseline=baseline_path,
        settings=settings,
        groups=groups,
        spent_usd=spent,
        failures=failures,
        warnings=warnings,
    )
