"""The line every benchmark prints first: the machine's load and cores, so that its figures
can be read (two workers cannot reach 2x on a machine whose other core is busy)."""

from __future__ import annotations

import os


def machine_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPU cores"
