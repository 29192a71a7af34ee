"""Call a Python reward model on whole batches and read what it returns, item by item: in this process (on the
model's worker thread) or inside a Ray actor, the same code.

- `fit_user(user_id, history)` is called once per user, the first time one of the user's items is to be scored,
  before any of them; a user whose fit raised has all their items fail with that cause (it is not called again).
- An exception in `score` or `prefer` fails the items that raise it: the batch is split in halves and each half
  asked again, down to single items, so one input the model cannot take does not fail its neighbours, and the
  cause names that input.
- A reply that is not one finite number per item (a wrong count, NaN, inf, text; for `prefer` a value outside
  [0, 1]) fails those items: a wrong count fails the whole batch (no score can be matched to its item), a bad
  value only its item.

Every failure is one line naming the model, the method and the first item it concerns, never a traceback; the
caller never caches it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prbj.local.rm_api import PairItem, ScoreItem
from prbj.local.rm_loader import article, error_text

Method = Literal["score", "prefer"]
Item = ScoreItem | PairItem


@dataclass(frozen=True, slots=True)
class RMFailure:
    """Why one item has no value: the judgment's status (`api_error`: the model raised; `parse_error`: it returned
    something that is not a usable number), the short cause failures are counted by, and the one-line message."""

    status: str
    cause: str
    message: str


Outcome = float | RMFailure


def _item_name(item: Item) -> str:
    return f"pair {item.pair_id} (user {item.user_id})"


class RMHost:
    """One reward model instance and the users it has fitted. Not thread-safe: one worker calls it."""

    def __init__(self, instance: Any, label: str) -> None:
        self.instance = instance
        self.label = label
        # user → None once fitted, or the failure of their fit.
        self.fitted: dict[str, RMFailure | None] = {}

    def run(
        self, method: Method, items: Sequence[Item], stop: threading.Event | None = None
    ) -> list[Outcome]:
        """One outcome per item, in order."""
        outcomes: list[Outcome | None] = [None] * len(items)
        ready: list[int] = []
        for index, item in enumerate(items):
            failure = self._fit(item)
            if failure is None:
                ready.append(index)
            else:
                outcomes[index] = failure
        if ready:
            self._call(method, items, ready, outcomes, stop)
        return [
            o if o is not None else RMFailure("api_error", "stopped", "the run was stopped") for o in outcomes
        ]

    def _fit(self, item: Item) -> RMFailure | None:
        user = item.user_id
        if user in self.fitted:
            return self.fitted[user]
        fit = getattr(self.instance, "fit_user", None)
        failure = None
        if fit is not None:
            try:
                fit(user, list(item.history))
            except Exception as err:
                failure = RMFailure(
                    "api_error",
                    f"fit_user raised {type(err).__name__}",
                    f"{self.label}: fit_user raised {error_text(err)} (user {user}, {len(item.history)} "
                    "history rows)",
                )
        self.fitted[user] = failure
        return failure

    def _call(
        self,
        method: Method,
        items: Sequence[Item],
        indexes: list[int],
        outcomes: list[Outcome | None],
        stop: threading.Event | None,
    ) -> None:
        if stop is not None and stop.is_set():
            return
        batch = [items[i] for i in indexes]
        try:
            returned = getattr(self.instance, method)(batch)
        except Exception as err:
            if len(indexes) > 1:
                half = len(indexes) // 2
                self._call(method, items, indexes[:half], outcomes, stop)
                self._call(method, items, indexes[half:], outcomes, stop)
                return
            outcomes[indexes[0]] = RMFailure(
                "api_error",
                f"{method} raised {type(err).__name__}",
                f"{self.label}: {method} raised {error_text(err)} on {_item_name(batch[0])}",
            )
            return
        values = _numbers(returned)
        if isinstance(values, str) or len(values) != len(batch):
            what = values if isinstance(values, str) else f"{len(values)} value{'s' * (len(values) != 1)}"
            size = f"{len(batch)} item{'s' * (len(batch) != 1)}"
            failure = RMFailure(
                "parse_error",
                f"{method} returned {'no list of numbers' if isinstance(values, str) else 'a wrong count'}",
                f"{self.label}: {method} returned {what} for a batch of {size}, the first {_item_name(batch[0])}",
            )
            for index in indexes:
                outcomes[index] = failure
            return
        for index, item, value in zip(indexes, batch, values, strict=True):
            outcomes[index] = self._checked(method, item, value)

    def _checked(self, method: Method, item: Item, value: float | str) -> Outcome:
        if isinstance(value, str):
            problem, short = value, "a non-number"
        elif not math.isfinite(value):
            problem = short = repr(value)  # nan, inf, -inf
        elif method == "prefer" and not 0.0 <= value <= 1.0:
            problem, short = f"{value!r} (a probability is in [0, 1])", "a value outside [0, 1]"
        else:
            return value
        return RMFailure(
            "parse_error",
            f"{method} returned {short}",
            f"{self.label}: {method} returned {problem} for {_item_name(item)}",
        )


def _numbers(returned: Any) -> list[float | str] | str:
    """The values of a reply as floats (an element that is no number as a description of it), or what the reply
    is instead of a sequence."""
    if isinstance(returned, str | bytes | dict) or returned is None:
        return f"{article(type(returned).__name__)}, not a list of numbers,"
    try:
        elements = list(returned)
    except TypeError:
        return f"{article(type(returned).__name__)}, not a list of numbers,"
    values: list[float | str] = []
    for element in elements:
        if isinstance(element, str | bytes | bool) or element is None:
            values.append(f"{element!r} (not a number)")
            continue
        try:
            values.append(float(element))
        except (TypeError, ValueError):
            values.append(f"{article(type(element).__name__)} (not a number)")
    return values
