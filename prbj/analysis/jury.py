"""Juries: a judge whose verdict on a pair is the majority of its members' verdicts.

`--jury NAME=judge1,judge2,judge3` names members as the `judge` column names them. A jury is formed in each
context all members ran in; when they share none and each ran in exactly one (e.g. offline baselines), one jury
of context `mixed` is formed from those. Members' calls are the run's own judgments (from the cache when the
members ran before), so a jury costs nothing extra.

Votes: a member's ok verdict `chosen` or `rejected` is a vote; `tie` and `inconsistent` abstain; a failed member
judgment abstains and is counted as a member failure. More `chosen` than `rejected` votes makes the jury right;
equal votes (including no vote from answering members) make a jury tie, which is never correct. When no member
answered, the jury judgment takes the most severe of the members' statuses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from prbj.analysis.derived import with_derived
from prbj.data.status import most_severe
from prbj.data.user_columns import is_user_column
from prbj.errors import ConfigError

MIXED_CONTEXT = "mixed"


@dataclass(frozen=True, slots=True)
class JurySpec:
    name: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class JuryStats:
    name: str
    context: str
    members: list[str]
    n: int
    ties: int
    member_failures: int
    no_member_answered: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_jury(text: str) -> JurySpec:
    name, sep, rest = text.partition("=")
    members = tuple(dict.fromkeys(m.strip() for m in rest.split(",") if m.strip()))
    if not sep or not name.strip() or len(members) < 2:
        raise ConfigError(f"--jury {text!r}: expected NAME=judge1,judge2[,...] with at least two judges")
    return JurySpec(name.strip(), members)


def _contexts(frame: pl.DataFrame, spec: JurySpec) -> list[tuple[str, dict[str, str]]]:
    """(jury context, member → the member's context it draws from)."""
    ran = {
        m: frame.filter(pl.col("judge") == m)["context"].unique(maintain_order=True).to_list()
        for m in spec.members
    }
    missing = [m for m, contexts in ran.items() if not contexts]
    if missing:
        raise ConfigError(f"--jury {spec.name}: {', '.join(missing)} did not run (add them with --provider)")
    shared = [c for c in ran[spec.members[0]] if all(c in ran[m] for m in spec.members)]
    if shared:
        return [(c, {m: c for m in spec.members}) for c in shared]
    if all(len(contexts) == 1 for contexts in ran.values()):
        return [(MIXED_CONTEXT, {m: ran[m][0] for m in spec.members})]
    raise ConfigError(f"--jury {spec.name}: its members share no context ({ran})")


def _decide(votes: list[tuple[str, str | None]]) -> tuple[str, str | None, int]:
    """(status, verdict, failures) from the members' (status, verdict)."""
    failures = sum(1 for status, _ in votes if status != "ok")
    answered = [verdict for status, verdict in votes if status == "ok"]
    if not answered:
        return most_severe(status for status, _ in votes), None, failures
    chosen, rejected = answered.count("chosen"), answered.count("rejected")
    verdict = "chosen" if chosen > rejected else "rejected" if rejected > chosen else "tie"
    return "ok", verdict, failures


def jury_judgments(frame: pl.DataFrame, spec: JurySpec) -> tuple[pl.DataFrame, list[JuryStats]]:
    """The jury's judgment rows (judgments.parquet columns) and its figures, per context."""
    if spec.name in set(frame["judge"].to_list()):
        raise ConfigError(f"--jury {spec.name}: a judge of that name already ran; pick another name")
    rows: list[dict[str, Any]] = []
    stats = []
    for context, sources in _contexts(frame, spec):
        by_member = {
            m: {
                r["pair_id"]: r
                for r in frame.filter(pl.col("judge") == m, pl.col("context") == c).iter_rows(named=True)
            }
            for m, c in sources.items()
        }
        pair_ids = [p for p in by_member[spec.members[0]] if all(p in by_member[m] for m in spec.members)]
        ties = failures = silent = 0
        for pair_id in pair_ids:
            member_rows = [by_member[m][pair_id] for m in spec.members]
            status, verdict, failed = _decide([(r["status"], r["verdict"]) for r in member_rows])
            failures += failed
            ties += verdict == "tie"
            silent += status != "ok"
            first = member_rows[0]
            rows.append(
                {
                    "pair_id": pair_id,
                    "subset": first["subset"],
                    "judge": spec.name,
                    "context": context,
                    "status": status,
                    "verdict": verdict,
                    "correct": status == "ok" and verdict == "chosen",
                    "tie": status == "ok" and verdict == "tie",
                    "chosen_words": first.get("chosen_words"),
                    "rejected_words": first.get("rejected_words"),
                    "cost_usd": 0.0,
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                    "error": f"{failed} of {len(member_rows)} members failed" if failed else None,
                    **{
                        k: first[k]
                        for k in first
                        if k in ("profile_posts", "profile_tokens", "rubric_aspects") or is_user_column(k)
                    },
                }
            )
        stats.append(JuryStats(spec.name, context, list(spec.members), len(pair_ids), ties, failures, silent))
    if not rows:
        return frame.clear(), stats
    # The jury's rows carry the columns the judgments have (a run read back may lack some); the rest are null.
    schema = {c: frame.schema[c] for c in rows[0] if c in frame.schema}
    return pl.DataFrame([{c: r[c] for c in schema} for r in rows], schema=schema), stats


def add_juries(frame: pl.DataFrame, specs: list[JurySpec]) -> tuple[pl.DataFrame, list[JuryStats]]:
    """The judgments with every jury's rows appended (missing columns null), and the juries' figures."""
    return with_derived(frame, specs, jury_judgments)
