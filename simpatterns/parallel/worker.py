"""What runs inside a worker of any backend: stopping (SIGTERM unwinds the item in
progress, SIGINT is the parent's to act on) and running a chunk of items."""

from __future__ import annotations
from simpatterns.errors import SimpatternsError

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

STOP_GRACE_S = 0.5  # how long a stopped worker may take to unwind its item before SIGKILL


class WorkerStopped(SimpatternsError):
    """Raised inside a worker when the parent stops the work (SIGTERM), so the item in
    progress unwinds: its ``finally`` blocks run and no temporary file is left behind."""


_STOPPING = False
_IN_ITEM = False


def _on_sigterm(signum: int, frame: Any) -> None:
    global _STOPPING
    _STOPPING = True
    if not _IN_ITEM:  # waiting for work (or starting): nothing to unwind, exit without a traceback
        os._exit(1)
    raise WorkerStopped("stopped by the parent")


def _install_stop_handlers() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when work stops
    signal.signal(signal.SIGTERM, _on_sigterm)
    sys.unraisablehook = _quiet_stop


def _quiet_stop(unraisable: Any) -> None:
    """A stop that landed inside a ``__del__`` cannot unwind the item (Python prints it and
    goes on): say nothing; `_run_items` stops before the next item."""
    if not isinstance(unraisable.exc_value, WorkerStopped):
        sys.__unraisablehook__(unraisable)


def _run_items(fn: Callable[..., Any], chunk: list[tuple[int, Any]], state: Any, has_state: bool
               ) -> list[tuple[int, Any]]:
    global _IN_ITEM
    out = []
    _IN_ITEM = True
    try:
        for i, item in chunk:
            if _STOPPING:
                raise WorkerStopped("stopped by the parent")
            out.append((i, fn(state, item) if has_state else fn(item)))
    finally:
        _IN_ITEM = False
    return out

