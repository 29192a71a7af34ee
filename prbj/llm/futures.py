"""Handing a result computed on a worker thread to the asyncio future that awaits it (run on the future's loop,
through `call_soon_threadsafe`): the cache's thread and the local models' batcher both do this."""

from __future__ import annotations

import asyncio
from typing import Any


def settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """Set `error` or `result` on `future`, unless it is done already (cancelled while the work ran)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
