"""The shared command-line options of every command that calls models, and the Gateway they open.

Providers are not resolved here: prbj.judges.setup.resolve_provider is the one place a provider spec becomes
a ProviderSpec ready to call (it needs in-process models, which sit above this layer)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbj.errors import ConfigError
from prbj.llm.budget import Budget
from prbj.llm.cache import ResponseCache
from prbj.llm.gateway import Gateway, Mode
from prbj.llm.routing import Routing, routing_for

if TYPE_CHECKING:
    from prbj.llm.batch.queue import BatchQueue

# The gateways opened while `watched_gateways()` is active: how a caller that runs whole commands (prbj run) reads
# what each one sent, planned and spent, without the commands having to return it. Blocks nest: a gateway is seen
# by every block it was opened in.
_watched: ContextVar[tuple[list[Gateway], ...]] = ContextVar("prbj_watched_gateways", default=())


@contextmanager
def watched_gateways() -> Iterator[list[Gateway]]:
    """Collect every gateway GatewayOptions.open() opens inside the block (their stats stay readable after
    they are closed)."""
    seen: list[Gateway] = []
    token = _watched.set((*_watched.get(), seen))
    try:
        yield seen
    finally:
        _watched.reset(token)


@dataclass(frozen=True)
class GatewayOptions:
    max_cost: float | None = None
    dry_run: bool = False
    cache_only: bool = False
    cache_dir: Path | None = None
    api_base: str | None = None
    providers_dir: Path | None = None
    env_file: Path | None = None
    # Limits for this run only (--rpm, --tpm, --input-tpm, --output-tpm, --max-concurrency, --timeout); None
    # keeps the profile's.
    rpm: float | None = None
    tpm: float | None = None
    input_tpm: float | None = None
    output_tpm: float | None = None
    max_concurrency: int | None = None
    timeout: float | None = None
    # --batch: buy misses through provider batch jobs; --no-wait: submit them and stop (collect later).
    batch: bool = False
    wait: bool = True
    # --reasoning-effort: sent to every LiteLLM provider of the run (part of the cache key); None: the profile's.
    reasoning_effort: str | None = None
    # --personal-data: what of the dataset's text may leave this machine (prbj.llm.routing); None: not stated.
    personal_data: str | None = None
    # The run's routing, once the command knows its data (for_data); a command that reads no dataset keeps any.
    routing: Routing | None = None

    @classmethod
    def pop_from(cls, options: dict[str, Any]) -> GatewayOptions:
        """Take the shared options out of a command's keyword arguments."""
        return cls(**{name: options.pop(name) for name in cls.__dataclass_fields__ if name in options})

    def for_data(self, source: str, *, public: bool) -> GatewayOptions:
        """These options with the routing of a run on `source`: --personal-data when stated, else `any` on
        public data and nothing remote on anyone else's."""
        return replace(self, routing=routing_for(self.personal_data, source, public=public))

    @property
    def routed(self) -> Routing:
        if self.routing is not None:
            return self.routing
        return routing_for(self.personal_data, "", public=True)

    @property
    def limit_overrides(self) -> dict[str, float | int]:
        """The provider fields this run overrides, named as in ProviderSpec; empty when none was given."""
        given = {
            "rpm": self.rpm,
            "tpm": self.tpm,
            "input_tpm": self.input_tpm,
            "output_tpm": self.output_tpm,
            "max_concurrency": self.max_concurrency,
            "timeout": self.timeout,
        }
        return {name: value for name, value in given.items() if value is not None}

    @property
    def mode(self) -> Mode:
        return "dry_run" if self.dry_run else "cache_only" if self.cache_only else "live"

    @property
    def sends(self) -> bool:
        return self.mode == "live"

    def open(self) -> Gateway:
        """The run's gateway; use it in a `with` block so that its cache is closed whatever happens."""
        if self.dry_run and self.cache_only:
            raise ConfigError("--dry-run and --cache-only exclude each other")
        if self.env_file is not None:
            from dotenv import load_dotenv

            load_dotenv(self.env_file, override=False)
        if self.batch and self.cache_only:
            raise ConfigError("--batch and --cache-only exclude each other")
        routing = self.routed
        if self.batch:
            routing.check_batch()
        cache = ResponseCache(self.cache_dir)
        gateway = Gateway(
            cache, Budget(self.max_cost), mode=self.mode, batch=self._batch_queue(cache), routing=routing
        )
        for seen in _watched.get():
            seen.append(gateway)
        return gateway

    def _batch_queue(self, cache: ResponseCache) -> BatchQueue | None:
        if not self.batch:
            return None
        from prbj.llm.batch.queue import BatchQueue

        run_id = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
        return BatchQueue(cache, cache.directory, run_id=run_id, wait=self.wait)
