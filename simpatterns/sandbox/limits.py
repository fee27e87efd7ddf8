"""What one sandbox job may spend: wall clock, CPU, memory, output, events."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class SandboxLimits:
    """Per-candidate limits. Defaults suit PHYRE traces of a few hundred frames."""

    timeout_s: float = 20.0  # wall clock for the whole candidate (all traces)
    smoke_timeout_s: float = 3.0  # wall clock until the smoke traces are done (cascade stage 1)
    n_smoke: int = 2  # the shortest traces run first, as the smoke test
    cpu_s: float | None = None  # RLIMIT_CPU; None: timeout_s
    memory_mb: int = 1024  # address space on top of the pre-warmed server's
    output_bytes: int = 1 << 20  # stdout+stderr cap (RLIMIT_FSIZE)
    max_events_per_trace: int = 5000
    max_result_bytes: int = 4 << 20  # events JSON; capped while it streams (bounds the parent's memory)
    recursion_limit: int = 1000
    server_grace_s: float = 10.0  # the parent's extra wall clock before it kills a server

    def request_fields(self) -> dict[str, Any]:
        d = asdict(self)
        d["cpu_s"] = self.cpu_s if self.cpu_s is not None else self.timeout_s
        d.pop("server_grace_s")
        return d
