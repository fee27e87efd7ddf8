"""The line every benchmark prints first: the machine's load and cores, so that its figures
can be read (two workers cannot reach 2x on a machine whose other core is busy), and a
speed probe.

The load average counts only this machine's own jobs. On a virtual machine the host's
other tenants can slow every core as well (measured here: the same simulation took 4.8 ms
per trace at one hour and 8.8 ms the next, at the same load average of 1.0). The probe
times a fixed piece of pure-Python and numpy work, best of 5: figures taken at different
probe times are not comparable; ratios measured in the same run still are.
"""

from __future__ import annotations

import os
import resource
import time

import numpy as np


def cpu_s() -> float:
    """CPU seconds of this process and its reaped children (the local pool's workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def speed_probe_ms() -> float:
    """Best of 5 timings of a fixed workload (a Python loop and small numpy calls), in ms."""
    x = np.arange(1000, dtype=np.float64)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        total = 0.0
        for k in range(100_000):
            total += k * 0.5
        for _ in range(1500):
            total += float(np.sqrt(x * x + 1.0).sum())
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def machine_line() -> str:
    one, five, fifteen = os.getloadavg()
    return (f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPU cores; "
            f"speed probe {speed_probe_ms():.1f} ms (lower is faster)")
