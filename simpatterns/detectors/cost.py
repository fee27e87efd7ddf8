"""A detector's cost in a unit that does not vary between runs: Python steps.

Measured time differs between two runs of the same program (cache, CPU frequency,
the machine's load), so a fitness that reads it cannot promise that the same seed
gives the same library. `counted_call` runs a detector and counts the lines of the
detector's own source that Python executes (a loop body counts once per
iteration), which is the same number in every run on the same traces. It is the
cost that matters for detectors: vectorised numpy code runs a few dozen steps per
trace, a Python loop over frames or pairs thousands. Work inside numpy calls is
not counted (the sandbox's CPU and memory limits bound it).

Counting makes pure-Python loops about 4-5 times slower (a Python callback per
line), so it stops at ``limit`` steps: past it the program runs at full speed
and its cost reads as ``limit``. The evolver's time penalty is 1 from twice its
reference on, and keeps the reference at or under half of `STEP_LIMIT`, so the
cut changes no penalty.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any, Callable

STEP_LIMIT = 100_000  # steps per call counted at most (the sandbox's and the evolver's cut)


def counted_call(fn: Callable[..., Any], *args: Any, limit: int = STEP_LIMIT) -> tuple[Any, int]:
    """``fn(*args)`` and the number of lines of ``fn``'s source file it executed
    (including functions and comprehensions defined in that file), at most ``limit``."""
    code = getattr(fn, "__code__", None)
    filename = code.co_filename if code is not None else None
    steps = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal steps
        if event == "line":
            steps += 1
            if steps >= limit:
                sys.settrace(None)  # enough: no more callbacks for the rest of the call
                return None
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        # frames of other files (numpy's Python wrappers) are not traced line by line
        return local if frame.f_code.co_filename == filename else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = fn(*args)
    finally:
        sys.settrace(previous)
    return result, steps
