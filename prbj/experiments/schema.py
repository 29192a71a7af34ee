"""The experiment file: read, validated and turned into an `Experiment`, with one-line errors naming the file,
the line and the field (`experiments/x.toml:12: field 'judges[2].order': ...`, exit 2).

Field by field (docs/experiments.md has the full reference):

    [experiment]  name, dataset, benchmarks (a list: card names or files, or {card, dataset} tables; each judge
                  runs on each), subsets, limit, seed, max_cost (USD for the whole experiment), personal_data
                  (--personal-data of every stage: local, zero-retention, pseudonymized or any)
    [defaults]    options given to every stage whose command has them (cache_dir, api_base, concurrency, ...)
    [planner]     provider, profile_k, repair, max_cost
    [[judges]]    provider, name, params_b, max_cost, and any option of `prbj judge` (context, order, mode,
                  samples, batch, ray, reasoning_effort, ...)
    [bon]         policy, n, gold, rms, k, max_cost; [bon.sample] [bon.score] [bon.evaluate] hold more options
                  of `prbj bon sample|score|evaluate`
    [downstream]  benchmarks (CSV rm,benchmark,accuracy), records (CSV/JSON files with rm,subset,score),
                  [[downstream.ppo]] rm, file (an official evaluation_summary.json), source
    [correlate]   options of `prbj correlate` (context, map, k, sources, ...)
    [report]      title, slices
    [claims]      smallest_effect, oracle_gap, meaningful_rho

Relative paths are relative to the experiment file's folder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from prbj.bon.demo import DEMO
from prbj.data.cards import PRB, resolve_card, shipped_cards
from prbj.data.names import did_you_mean
from prbj.data.toml_lines import TomlFields, key_lines, kind, read_toml
from prbj.errors import ConfigError
from prbj.experiments.commandline import (
    CommandLine,
    CommandPath,
    OptionInfo,
    entry_argv,
    option_index,
    resolve_path,
)
from prbj.judges.registry import judge_factory
from prbj.llm.providers import check_provider_name

JUDGE: CommandPath = ("judge",)
BON_SAMPLE: CommandPath = ("bon", "sample")
BON_SCORE: CommandPath = ("bon", "score")
BON_EVALUATE: CommandPath = ("bon", "evaluate")
CORRELATE: CommandPath = ("correlate",)
COMMANDS: tuple[CommandPath, ...] = (JUDGE, BON_SAMPLE, BON_SCORE, BON_EVALUATE, CORRELATE)

# Options an experiment sets itself, for every stage alike: an entry may not set them.
MANAGED = {
    "out": "the experiment directory holds every stage's output (prbj run --out)",
    "dataset": "set it once in [experiment]",
    "subsets": "set it once in [experiment]",
    "subset": "set it once in [experiment]",
    "limit": "set it once in [experiment]",
    "seed": "set it once in [experiment]",
    "benchmark": "list it in [experiment] benchmarks",
    "dry_run": "use prbj run --dry-run",
    "dry-run": "use prbj run --dry-run",
    "cache_only": "managed by prbj run",
    "cache-only": "managed by prbj run",
    "providers": "use 'provider'",
    "provider": "use 'provider'",
    "run_dir": "managed by prbj run",
    "personal_data": "set it once in [experiment]: one policy for every stage",
    "personal-data": "set it once in [experiment]: one policy for every stage",
}
SECTIONS = (
    "experiment",
    "defaults",
    "planner",
    "judges",
    "bon",
    "downstream",
    "correlate",
    "report",
    "claims",
)


@dataclass(frozen=True)
class Settings:
    """Where an entry sits in the file (for errors) and the options it gives its command."""

    field: str
    options: dict[str, Any]


@dataclass(frozen=True)
class JudgeEntry:
    name: str
    provider: str
    params_b: float | None
    max_cost: float | None
    settings: Settings


@dataclass(frozen=True)
class PlannerEntry:
    provider: str
    profile_k: int
    repair: bool
    max_cost: float | None


@dataclass(frozen=True)
class BonEntry:
    policy: str
    gold: str
    n: int
    rms: tuple[str, ...]
    k: str
    max_cost: float | None
    sample: Settings
    score: Settings
    evaluate: Settings


@dataclass(frozen=True)
class PpoFile:
    rm: str
    file: Path
    source: str


@dataclass(frozen=True)
class DownstreamEntry:
    benchmarks: Path | None = None
    records: tuple[Path, ...] = ()
    source: str | None = None
    ppo: tuple[PpoFile, ...] = ()

    @property
    def files(self) -> tuple[Path, ...]:
        return (*([self.benchmarks] if self.benchmarks else []), *self.records, *(p.file for p in self.ppo))


@dataclass(frozen=True)
class ClaimSettings:
    # The smallest accuracy difference that counts as an effect (a context helping), in accuracy points / 100.
    smallest_effect: float = 0.02
    # How far below the oracle setting "far below" is.
    oracle_gap: float = 0.10
    # The smallest rank correlation between parameter count and accuracy that counts as "growing".
    meaningful_rho: float = 0.5


@dataclass(frozen=True)
class BenchmarkEntry:
    """One benchmark a study runs its judges on: `benchmark` is what `--benchmark` gets (a shipped card's name or
    a card file; None: the layout is read from the data, as without --benchmark), `label` its card's name."""

    label: str
    benchmark: str | None
    dataset: str


@dataclass(frozen=True)
class Experiment:
    path: Path
    name: str
    digest: str
    dataset: str
    subsets: tuple[str, ...]
    limit: int | None
    seed: int
    max_cost: float | None
    # The dataset's size when it is not on this machine: a dry run then plans on the bundled sample, scaled.
    expected_pairs: int | None
    defaults: dict[str, Any]
    planner: PlannerEntry | None
    judges: tuple[JudgeEntry, ...]
    bon: BonEntry | None
    downstream: DownstreamEntry | None
    correlate: Settings | None
    report_title: str | None
    report_slices: tuple[str, ...]
    claims: ClaimSettings = field(default_factory=ClaimSettings)
    # What of the dataset's text may leave this machine (--personal-data of every stage); None: not stated.
    personal_data: str | None = None
    # Every benchmark the judges run on; one entry (the dataset above, read as it is) unless the file lists more.
    benchmarks: tuple[BenchmarkEntry, ...] = ()

    @property
    def base(self) -> Path:
        return self.path.parent

    @property
    def studied(self) -> tuple[BenchmarkEntry, ...]:
        return self.benchmarks or (BenchmarkEntry(PRB, None, self.dataset),)

    @property
    def main(self) -> BenchmarkEntry:
        """The benchmark best-of-N, the correlation and the paper's claims are about: Personalized RewardBench
        (its rubric grades best-of-N picks) when listed, else the first."""
        return next((b for b in self.studied if b.label == PRB), self.studied[0])

    def judge(self, name: str) -> JudgeEntry | None:
        return next((j for j in self.judges if j.name == name), None)


class _Reader(TomlFields):
    """Validation with errors that name file, line and field; and the options of prbj's commands."""

    def options(
        self,
        table: Mapping[str, Any],
        where: str,
        known: Mapping[str, OptionInfo],
        *,
        skip: Sequence[str] = (),
        command: str,
    ) -> dict[str, Any]:
        """The entry's keys that name options of `command`, by their canonical keyword."""
        picked: dict[str, Any] = {}
        for key, value in table.items():
            if key in skip:
                continue
            if key in MANAGED:
                raise self.error(f"{where}.{key}", f"not settable here: {MANAGED[key]}")
            option = known.get(key)
            if option is None:
                names = sorted({k for o in known.values() for k in o.keys[:1]} | set(skip))
                raise self.error(
                    f"{where}.{key}",
                    f"not an option of 'prbj {command}';{did_you_mean(key, names)} see 'prbj {command} --help'",
                )
            if isinstance(value, dict):
                raise self.error(f"{where}.{key}", f"expected a value or a list, got {kind(value)}")
            picked[option.keys[0]] = value
        return picked

    def checked(
        self,
        cli: CommandLine,
        command: CommandPath,
        settings: Settings,
        base: Path,
        extra: Sequence[str] = (),
    ) -> None:
        """Let the command itself parse each option (types, choices, ranges), so that the error names the line
        of the key it is about; then all of them together."""
        known = option_index(cli.options(command))
        for key, value in settings.options.items():
            problem = cli.check(command, [*extra, *entry_argv(known, {key: value}, base=base)])
            if problem:
                raise self.error(f"{settings.field}.{key}", problem)
        problem = cli.check(command, [*extra, *entry_argv(known, settings.options, base=base)])
        if problem:
            raise self.error(settings.field, problem)


def load_experiment(path: Path, cli: CommandLine) -> Experiment:
    path = Path(path)
    doc, text = read_toml(path)
    reader = _Reader(path, key_lines(text))
    reader.keys(doc, "", SECTIONS)
    base = path.resolve().parent
    experiment = reader.table(doc, "experiment", "experiment")
    reader.keys(
        experiment,
        "experiment",
        (
            "name",
            "description",
            "dataset",
            "benchmarks",
            "subsets",
            "limit",
            "seed",
            "max_cost",
            "expected_pairs",
            "personal_data",
        ),
    )
    dataset = reader.string(experiment, "dataset", "experiment") or "sample"
    benchmarks = _benchmarks(reader, experiment, base)
    defaults = _defaults(reader, doc, cli)
    names = _Names(reader, base, defaults.get("providers_dir"))
    judges = _judges(reader, doc, cli, base, names)
    bon = _bon(reader, doc, cli, base, judges, names)
    report = reader.table(doc, "report", "report")
    reader.keys(report, "report", ("title", "slices"))
    loaded = Experiment(
        path=path,
        name=reader.string(experiment, "name", "experiment") or path.stem,
        digest=hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest(),
        dataset=_dataset(dataset, base),
        subsets=reader.strings(experiment, "subsets", "experiment"),
        limit=reader.integer(experiment, "limit", "experiment", minimum=1),
        seed=_seed(reader.integer(experiment, "seed", "experiment", minimum=0)),
        max_cost=reader.number(experiment, "max_cost", "experiment"),
        expected_pairs=reader.integer(experiment, "expected_pairs", "experiment", minimum=1),
        defaults=defaults,
        planner=_planner(reader, doc, names),
        judges=judges,
        bon=bon,
        downstream=_downstream(reader, doc, base),
        correlate=_correlate(reader, doc, cli, base),
        report_title=reader.string(report, "title", "report"),
        report_slices=reader.strings(report, "slices", "report"),
        claims=_claims(reader, doc),
        personal_data=_personal_data(reader, experiment),
        benchmarks=benchmarks,
    )
    if benchmarks:
        if "dataset" in experiment:
            raise reader.error(
                "experiment.dataset",
                "with 'benchmarks', give each benchmark's dataset in its entry ({card = ..., dataset = ...})",
            )
        loaded = replace(loaded, dataset=loaded.main.dataset)
        if bon is not None and loaded.main.label != PRB:
            raise reader.error(
                "bon", "best-of-N is graded with PRB's rubric: list 'prb' among the benchmarks"
            )
    if loaded.planner is None and any("planner" in _contexts(j.settings.options) for j in judges):
        name = next(j.name for j in judges if "planner" in _contexts(j.settings.options))
        raise reader.error(
            f"judges[{_index(judges, name)}].context", "context 'planner' needs a [planner] table"
        )
    if not judges and bon is None:
        raise reader.error("judges", "the experiment has no [[judges]] and no [bon]: nothing to run")
    return loaded


def _personal_data(reader: _Reader, experiment: Mapping[str, Any]) -> str | None:
    from prbj.llm.routing import POLICIES

    value = reader.string(experiment, "personal_data", "experiment")
    if value is not None and value not in POLICIES:
        raise reader.error(
            "experiment.personal_data",
            f"{value!r} is not a policy;{did_you_mean(value, list(POLICIES))} expected one of {', '.join(POLICIES)}",
        )
    return value


def _benchmarks(reader: _Reader, table: Mapping[str, Any], base: Path) -> tuple[BenchmarkEntry, ...]:
    """[experiment] benchmarks: each a card (a shipped name, or a file relative to the experiment file) or a
    {card, dataset} table; the dataset defaults to the card's bundled sample."""
    raw = table.get("benchmarks")
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise reader.error("experiment.benchmarks", f"expected a non-empty list, got {kind(raw)}")
    entries: list[BenchmarkEntry] = []
    for number, item in enumerate(raw, start=1):
        where = f"experiment.benchmarks[{number}]"
        item = {"card": item} if isinstance(item, str) else item
        if not isinstance(item, dict):
            raise reader.error(where, f"expected a card name or a {{card, dataset}} table, got {kind(item)}")
        reader.keys(item, where, ("card", "dataset"))
        spec = str(reader.string(item, "card", where, required=True))
        if spec not in shipped_cards() and (spec.endswith(".toml") or "/" in spec):
            spec = resolve_path(spec, base)
        try:
            card = resolve_card(spec)
        except ConfigError as err:
            raise reader.error(f"{where}.card", str(err)) from None
        if any(e.label == card.name for e in entries):
            raise reader.error(f"{where}.card", f"{card.name} is listed twice")
        entries.append(
            BenchmarkEntry(card.name, spec, _dataset(reader.string(item, "dataset", where) or "sample", base))
        )
    return tuple(entries)


def _seed(value: int | None) -> int:
    return 42 if value is None else value


def _index(judges: Sequence[JudgeEntry], name: str) -> int:
    return next(i for i, j in enumerate(judges, start=1) if j.name == name)


def _contexts(options: Mapping[str, Any]) -> list[str]:
    value = options.get("context", [])
    return [value] if isinstance(value, str) else list(value)


def _dataset(value: str, base: Path) -> str:
    """`sample` and `hf:` ids as they are; a file or folder relative to the experiment file."""
    if value == "sample" or value.startswith("hf:"):
        return value
    return resolve_path(value, base)


def _defaults(reader: _Reader, doc: Mapping[str, Any], cli: CommandLine) -> dict[str, Any]:
    """[defaults]: each key must be an option of at least one stage command; each command gets those it has."""
    table = reader.table(doc, "defaults", "defaults")
    known = {key: o for command in COMMANDS for key, o in option_index(cli.options(command)).items()}
    if "max_cost" in table or "max-cost" in table:
        raise reader.error(
            "defaults.max_cost", "caps go in [experiment] max_cost (total) or a stage's max_cost"
        )
    return reader.options(table, "defaults", known, command="judge|bon|correlate")


class _Names:
    """Judge and provider names checked when the file is read (a typo in a provider is one line naming the
    file, line and field before any folder is made), against the profiles a run would read: the entry's own
    providers_dir, else [defaults]', else the bundled ones and PRBJ_PROVIDERS_DIR."""

    def __init__(self, reader: _Reader, base: Path, providers_dir: Any) -> None:
        self.reader = reader
        self.base = base
        self.providers_dir = providers_dir

    def _folder(self, own: Any) -> Path | None:
        value = own if own is not None else self.providers_dir
        return Path(resolve_path(str(value), self.base)) if value is not None else None

    def judge(self, spec: str, where: str, own_providers_dir: Any = None) -> None:
        try:
            judge_factory(spec, self._folder(own_providers_dir))
        except ConfigError as err:
            raise self.reader.error(where, str(err)) from None

    def provider(self, spec: str, where: str, *, demo: bool = False, own_providers_dir: Any = None) -> None:
        if demo and spec == DEMO:
            return
        try:
            check_provider_name(spec, self._folder(own_providers_dir))
        except ConfigError as err:
            raise self.reader.error(where, str(err)) from None


def _judges(
    reader: _Reader, doc: Mapping[str, Any], cli: CommandLine, base: Path, names: _Names
) -> tuple[JudgeEntry, ...]:
    raw = doc.get("judges", [])
    if not isinstance(raw, list):
        raise reader.error("judges", "expected [[judges]] tables")
    known = option_index(cli.options(JUDGE))
    judges: list[JudgeEntry] = []
    for number, table in enumerate(raw, start=1):
        where = f"judges[{number}]"
        if not isinstance(table, dict):
            raise reader.error(where, "expected a table")
        provider = reader.string(table, "provider", where, required=True)
        assert provider is not None
        if provider.startswith("hf:") and not provider.startswith("hf:/"):
            local = base / provider.removeprefix("hf:")
            if local.exists():  # a folder beside the experiment file; else a hub id
                provider = f"hf:{local.resolve()}"
        name = reader.string(table, "name", where) or provider
        if any(j.name == name for j in judges):
            raise reader.error(f"{where}.name", f"two judges are named {name!r}: give each its own 'name'")
        options = reader.options(
            table, where, known, skip=("provider", "name", "params_b", "max_cost"), command="judge"
        )
        settings = Settings(where, options)
        names.judge(provider, f"{where}.provider", options.get("providers_dir"))
        reader.checked(cli, JUDGE, settings, base, ["--provider", provider])
        judges.append(
            JudgeEntry(
                name=name,
                provider=provider,
                params_b=reader.number(table, "params_b", where, positive=True),
                max_cost=reader.number(table, "max_cost", where),
                settings=settings,
            )
        )
    return tuple(judges)


def _planner(reader: _Reader, doc: Mapping[str, Any], names: _Names) -> PlannerEntry | None:
    if "planner" not in doc:
        return None
    table = reader.table(doc, "planner", "planner")
    reader.keys(table, "planner", ("provider", "profile_k", "repair", "max_cost"))
    provider = reader.string(table, "provider", "planner", required=True)
    repair = table.get("repair", False)
    if not isinstance(repair, bool):
        raise reader.error("planner.repair", f"expected true or false, got {repair!r}")
    assert provider is not None
    names.provider(provider, "planner.provider")
    return PlannerEntry(
        provider=provider,
        profile_k=reader.integer(table, "profile_k", "planner", minimum=1) or 10,
        repair=repair,
        max_cost=reader.number(table, "max_cost", "planner"),
    )


def _bon(
    reader: _Reader,
    doc: Mapping[str, Any],
    cli: CommandLine,
    base: Path,
    judges: Sequence[JudgeEntry],
    names: _Names,
) -> BonEntry | None:
    if "bon" not in doc:
        return None
    table = reader.table(doc, "bon", "bon")
    reader.keys(table, "bon", ("policy", "gold", "n", "rms", "k", "max_cost", "sample", "score", "evaluate"))
    policy = reader.string(table, "policy", "bon", required=True)
    gold = reader.string(table, "gold", "bon", required=True)
    rms = reader.strings(table, "rms", "bon")
    if not rms:
        raise reader.error("bon.rms", "name at least one reward model (a judge's provider, e.g. 'length')")
    rms = tuple(_local_rm(rm, base, judges) for rm in rms)
    for number, rm in enumerate(rms, start=1):
        names.judge(rm, f"bon.rms[{number}]")
    k = table.get("k", "max")
    if not (k in ("max", "all") or (isinstance(k, int) and not isinstance(k, bool) and k >= 1)):
        raise reader.error("bon.k", f"expected 'max', 'all' or a whole number ≥ 1, got {k!r}")
    parts = {}
    for step, command, fixed in (
        ("sample", BON_SAMPLE, ["--policy", str(policy)]),
        ("score", BON_SCORE, ["--provider", "length"]),
        ("evaluate", BON_EVALUATE, ["--gold", str(gold)]),
    ):
        where = f"bon.{step}"
        options = reader.options(
            reader.table(table, step, where),
            where,
            option_index(cli.options(command)),
            command=" ".join(command),
        )
        for owned in ("policy", "n", "gold", "providers"):
            if owned in options:
                raise reader.error(f"{where}.{owned}", f"set it in [bon] ('{owned}')")
        parts[step] = Settings(where, options)
        # bon score/evaluate take the run directory as an argument: check their options against a stand-in.
        stand_in = [] if step == "sample" else [str(base)]
        reader.checked(cli, command, parts[step], base, [*stand_in, *fixed])
    for key, value, step in (("policy", policy, "sample"), ("gold", gold, "evaluate")):
        own = parts[step].options.get("providers_dir")
        names.provider(str(value), f"bon.{key}", demo=True, own_providers_dir=own)
    return BonEntry(
        policy=str(policy),
        gold=str(gold),
        n=reader.integer(table, "n", "bon", minimum=1) or 8,
        rms=rms,
        k=str(k),
        max_cost=reader.number(table, "max_cost", "bon"),
        sample=parts["sample"],
        score=parts["score"],
        evaluate=parts["evaluate"],
    )


def _local_rm(rm: str, base: Path, judges: Sequence[JudgeEntry]) -> str:
    """A BoN reward model named by a judge's name is that judge's provider; hf: folders resolve as judges do."""
    judge = next((j for j in judges if j.name == rm), None)
    if judge is not None:
        return judge.provider
    if rm.startswith("hf:") and not rm.startswith("hf:/") and (base / rm.removeprefix("hf:")).exists():
        return f"hf:{(base / rm.removeprefix('hf:')).resolve()}"
    return rm


def _downstream(reader: _Reader, doc: Mapping[str, Any], base: Path) -> DownstreamEntry | None:
    if "downstream" not in doc:
        return None
    table = reader.table(doc, "downstream", "downstream")
    reader.keys(table, "downstream", ("benchmarks", "records", "source", "ppo"))
    ppo_raw = table.get("ppo", [])
    if not isinstance(ppo_raw, list):
        raise reader.error("downstream.ppo", "expected [[downstream.ppo]] tables")
    ppo = []
    for number, entry in enumerate(ppo_raw, start=1):
        where = f"downstream.ppo[{number}]"
        if not isinstance(entry, dict):
            raise reader.error(where, "expected a table")
        reader.keys(entry, where, ("rm", "file", "source"))
        rm = reader.string(entry, "rm", where, required=True)
        file = reader.string(entry, "file", where, required=True)
        ppo.append(
            PpoFile(
                str(rm),
                _existing(reader, f"{where}.file", str(file), base),
                reader.string(entry, "source", where) or "ppo",
            )
        )
    benchmarks = reader.string(table, "benchmarks", "downstream")
    return DownstreamEntry(
        benchmarks=_existing(reader, "downstream.benchmarks", benchmarks, base) if benchmarks else None,
        records=tuple(
            _existing(reader, f"downstream.records[{i}]", f, base)
            for i, f in enumerate(reader.strings(table, "records", "downstream"), start=1)
        ),
        source=reader.string(table, "source", "downstream"),
        ppo=tuple(ppo),
    )


def _existing(reader: _Reader, where: str, value: str, base: Path) -> Path:
    path = Path(resolve_path(value, base))
    if not path.exists():
        raise reader.error(where, f"{value}: no such file")
    return path


def _correlate(reader: _Reader, doc: Mapping[str, Any], cli: CommandLine, base: Path) -> Settings | None:
    if "correlate" not in doc:
        return None
    table = reader.table(doc, "correlate", "correlate")
    owned = ("runs", "run", "store", "benchmarks")
    for key in owned:
        if key in table:
            raise reader.error(f"correlate.{key}", "set by the experiment (its judge runs, [downstream])")
    settings = Settings(
        "correlate",
        reader.options(table, "correlate", option_index(cli.options(CORRELATE)), command="correlate"),
    )
    reader.checked(cli, CORRELATE, settings, base)
    return settings


def _claims(reader: _Reader, doc: Mapping[str, Any]) -> ClaimSettings:
    table = reader.table(doc, "claims", "claims")
    reader.keys(table, "claims", ("smallest_effect", "oracle_gap", "meaningful_rho"))
    defaults = ClaimSettings()
    values = {}
    for key in ("smallest_effect", "oracle_gap", "meaningful_rho"):
        value = reader.number(table, key, "claims", positive=True)
        if value is not None and value > 1:
            raise reader.error(f"claims.{key}", f"expected a number in (0, 1], got {value}")
        values[key] = value if value is not None else getattr(defaults, key)
    return ClaimSettings(**values)
