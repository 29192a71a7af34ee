"""Where a run's dataset text may go (`--personal-data`), and the one check every provider passes before it is
sent anything.

The policy is stated per run; what a provider does with what it receives is what its profile states
(`retention = "zero" | "standard"`, `local = true`), never guessed from its URL: `--api-base http://127.0.0.1`
may be a proxy that forwards anywhere. A profile that states nothing keeps data (`standard`) and is remote.

| policy           | who may be sent the text                                            | provider batch jobs |
|------------------|---------------------------------------------------------------------|---------------------|
| `local`          | in-process models and profiles with `local = true`                  | refused             |
| `zero-retention` | those, and profiles with `retention = "zero"`                       | refused             |
| `pseudonymized`  | any provider, after prbj.privacy replaced the personal entities     | allowed             |
| `any`            | any provider                                                        | allowed             |

A run on data that is not public (a user's own file) with no stated policy sends nothing to a remote model:
it behaves as `local` until `--personal-data` says otherwise (docs/privacy.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, cast, get_args

from prbj.errors import ConfigError

PersonalData = Literal["local", "zero-retention", "pseudonymized", "any"]
POLICIES: tuple[str, ...] = get_args(PersonalData)
Retention = Literal["zero", "standard"]
RETENTIONS: tuple[str, ...] = get_args(Retention)
OPTION = "--personal-data"
# Where the rules are explained, named by every refusal.
GUIDE = "docs/privacy.md"


class Destination(Protocol):
    """What the routing reads of a provider (prbj.llm.providers.ProviderSpec)."""

    @property
    def name(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def retention(self) -> str: ...
    @property
    def runs_here(self) -> bool: ...
    @property
    def claims_note(self) -> str: ...


@dataclass(frozen=True)
class Routing:
    """A run's policy. `policy` None: not stated, on data that is not public (sends to local models only).
    `source` names the data in messages (a dataset path, 'sample')."""

    policy: PersonalData | None = "any"
    source: str = ""

    @property
    def pseudonymizes(self) -> bool:
        return self.policy == "pseudonymized"

    @property
    def guards(self) -> bool:
        """Whether the run's files must hold pair ids instead of personal text (every policy but `any`)."""
        return self.policy != "any"

    @property
    def stated(self) -> str:
        return self.policy if self.policy is not None else "not stated"

    def refusal(self, provider: Destination) -> str | None:
        """Why `provider` may not be sent this run's text, in one line naming it and the rule; None if it may."""
        if self.policy in ("any", "pseudonymized") or provider.runs_here:
            return None
        where = provider.source or "its profile"
        if self.policy is None:
            return (
                f"provider {provider.name!r} is not local, and {self.source or 'this dataset'} is not public "
                f"data: prbj sends it to no remote model until you state what may leave this machine with "
                f"{OPTION} any | pseudonymized | zero-retention | local (see {GUIDE})"
            )
        if self.policy == "zero-retention" and provider.retention == "zero":
            return None
        rule = (
            f'{OPTION} zero-retention sends only to profiles that state retention = "zero" or local = true'
            if self.policy == "zero-retention"
            else f"{OPTION} local sends only to in-process models and profiles that state local = true"
        )
        if provider.claims_note:
            # The profile stated it, and this run's endpoint or its own `extends` dropped it: say which.
            return f"provider {provider.name!r} may not be sent this data: {provider.claims_note} ({rule})"
        if self.policy == "zero-retention":
            return (
                f'provider {provider.name!r} may keep what it is sent (retention = "{provider.retention}" in '
                f"{where}): {rule}"
            )
        return f"provider {provider.name!r} is not local (no local = true in {where}): {rule}"

    def check(self, provider: Destination) -> None:
        reason = self.refusal(provider)
        if reason is not None:
            raise ConfigError(reason)

    def check_batch(self) -> None:
        """Provider batch endpoints keep their input files for days: never zero-retention, never local."""
        if self.policy in ("any", "pseudonymized"):
            return
        rule = (
            f"{OPTION} {self.policy}"
            if self.policy is not None
            else f"data that is not public ({self.source})"
        )
        raise ConfigError(
            f"--batch: provider batch endpoints keep the request files for days (never zero-retention); "
            f"{rule} forbids them: run live, or state {OPTION} pseudonymized or any (see {GUIDE})"
        )

    def record(self) -> dict[str, str]:
        """What run.json records of the policy."""
        return {"personal_data": self.stated}


def check_policy(value: str, *, where: str = OPTION) -> PersonalData:
    if value not in POLICIES:
        from prbj.data.names import did_you_mean

        raise ConfigError(
            f"{where}: {value!r} is not a policy;{did_you_mean(value, list(POLICIES))} expected one of "
            f"{', '.join(POLICIES)}"
        )
    return cast(PersonalData, value)


def routing_for(policy: str | None, source: str, *, public: bool) -> Routing:
    """The run's routing: the stated policy; else `any` on public data (the bundled sample, the published
    benchmark), and nothing remote on anyone else's."""
    if policy is not None:
        return Routing(check_policy(policy), source)
    return Routing("any" if public else None, source)
