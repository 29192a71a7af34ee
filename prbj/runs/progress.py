"""What a run shows while it works: done/total, ETA, calls per second (and per minute over the last seconds,
the figure to hold against a provider's rate limit), dollars spent (and the cap), failures.

On a terminal this is a Rich progress bar. When stderr is not a terminal (CI logs, `| tee`, nohup) a bar would
draw nothing, so a plain line is printed every PROGRESS_EVERY seconds and once at the end instead: a long run
is never silent."""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

# Seconds between plain progress lines when stderr is not a terminal; PRBJ_PROGRESS_EVERY changes it.
PROGRESS_EVERY = 10.0
# The current rate is the calls sent over about this many seconds, sampled at most every RECENT_SAMPLE seconds.
RECENT_WINDOW = 10.0
RECENT_SAMPLE = 0.5


@dataclass(frozen=True)
class Meter:
    """What a run knows beyond jobs done: each read when the display refreshes. A field left None is not shown."""

    # USD spent so far, and the cap (--max-cost).
    spent: Callable[[], float] | None = None
    cap: float | None = None
    # Model requests sent so far (calls per second counts these, not cached answers).
    calls: Callable[[], int] | None = None
    # Whether a job's result is a failure (counted as "failed so far").
    failed: Callable[[Any], bool] | None = None
    # Whether a failed job's calls never reached the provider (counted as "not sent", not as failed).
    not_sent: Callable[[Any], bool] | None = None


def _every() -> float:
    try:
        return max(0.05, float(os.environ.get("PRBJ_PROGRESS_EVERY", PROGRESS_EVERY)))
    except ValueError:
        return PROGRESS_EVERY


def _clock(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class JobProgress:
    """`async with JobProgress(...) as progress:` then `progress.advance(result)` per finished job."""

    def __init__(
        self,
        description: str,
        total: int,
        *,
        console: Console | None = None,
        show: bool = True,
        meter: Meter | None = None,
    ) -> None:
        self.description = description
        self.total = total
        self.console = console or Console(stderr=True)
        self.show = show
        self.meter = meter or Meter()
        self.done = 0
        self.failures = 0
        self.unsent = 0
        self._started = time.monotonic()
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._ticker: asyncio.Task[None] | None = None
        # (time, calls sent) samples over the last RECENT_WINDOW seconds, for the current rate.
        self._recent: deque[tuple[float, int]] = deque()

    # --- figures ---------------------------------------------------------------------------------------

    def _rate(self) -> tuple[float, str]:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        calls = self.meter.calls() if self.meter.calls is not None else 0
        # Offline judges and cached replays send nothing: their pace is results per second.
        return (calls / elapsed, "calls/s") if calls else (self.done / elapsed, "done/s")

    def current_rate(self) -> float | None:
        """Calls sent per minute over the last ~RECENT_WINDOW seconds; None before there is a span to measure."""
        if self.meter.calls is None:
            return None
        now, calls = time.monotonic(), self.meter.calls()
        recent = self._recent
        if not recent or now - recent[-1][0] >= RECENT_SAMPLE:
            recent.append((now, calls))
        while len(recent) > 2 and now - recent[1][0] >= RECENT_WINDOW:
            recent.popleft()
        then, before = recent[0]
        return (calls - before) / (now - then) * 60 if now - then >= RECENT_SAMPLE else None

    def _eta(self) -> str:
        elapsed = time.monotonic() - self._started
        if not self.done:
            return "?"
        return _clock(elapsed / self.done * (self.total - self.done))

    def _money(self) -> str:
        if self.meter.spent is None or (self.meter.cap is None and not self.meter.spent()):
            return ""
        cap = f" of ${self.meter.cap:.2f}" if self.meter.cap is not None else ""
        return f"${self.meter.spent():.4f}{cap}"

    def extras(self) -> str:
        """Calls per second, money and failures, as one short phrase."""
        rate, unit = self._rate()
        now = self.current_rate() if unit == "calls/s" else None
        pace = f"{rate:.1f} {unit}" + (f" ({now:,.0f}/min now)" if now is not None else "")
        unsent = f"{self.unsent} not sent" if self.unsent else ""
        parts = [pace, self._money(), f"{self.failures} failed", unsent]
        return " · ".join(part for part in parts if part)

    def line(self) -> str:
        """The plain progress line (not a terminal)."""
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        elapsed = _clock(time.monotonic() - self._started)
        return (
            f"{self.description}: {self.done}/{self.total}{share}, elapsed {elapsed}, ETA {self._eta()}, "
            f"{self.extras()}"
        )

    # --- display -----------------------------------------------------------------------------------------

    async def __aenter__(self) -> JobProgress:
        self._started = time.monotonic()
        if not self.show:
            return self
        if self.console.is_terminal:
            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[extras]}"),
                console=self.console,
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=self.total, extras=self.extras())
        else:
            self._ticker = asyncio.create_task(self._tick())
        return self

    async def _tick(self) -> None:
        every = _every()
        while True:
            await asyncio.sleep(every)
            self._print_line()

    def _print_line(self) -> None:
        self.console.print(self.line(), highlight=False, soft_wrap=True, markup=False)

    def advance(self, result: Any = None) -> None:
        self.done += 1
        if self.meter.not_sent is not None and self.meter.not_sent(result):
            self.unsent += 1
        elif self.meter.failed is not None and self.meter.failed(result):
            self.failures += 1
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=1, extras=self.extras())

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._print_line()  # the last word, also when the run was cut short
        if self._bar is not None:
            self._bar.__exit__(kind, error, trace)
