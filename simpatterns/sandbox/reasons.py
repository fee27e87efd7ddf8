"""Why untrusted code was rejected: short machine-readable codes.

Every rejection (AST gate, sandbox, schema check, and in the evolver fitness,
database and proposers) carries one `Reason` code plus a one-line detail. The
codes are stable strings: they go into the evolver's sample log, the report's
rejection table, later prompts as feedback (shortened), and annotation errors
(`rejected by the sandbox (timeout: ...)`).
"""

from __future__ import annotations

from dataclasses import dataclass

from simpatterns.errors import SimpatternsError

# static checks (no code has run)
SYNTAX_ERROR = "syntax_error"
CONTRACT = "contract"  # missing/malformed PATTERN, DESCRIPTION, DEPENDS, PARAMS or detect
WRONG_PATTERN = "wrong_pattern"  # PATTERN is not the label being evolved
UNKNOWN_DEPENDENCY = "unknown_dependency"
FORBIDDEN_IMPORT = "forbidden_import"
FORBIDDEN_NAME = "forbidden_name"
FORBIDDEN_ATTRIBUTE = "forbidden_attribute"
TOO_LONG = "too_long"
NO_FUNCTION = "no_function"  # an LLM answer without a usable function
NOTHING_TO_MUTATE = "nothing_to_mutate"  # the offline proposer found no constant or comparison
# running it (sandbox)
TIMEOUT = "timeout"
CPU_LIMIT = "cpu_limit"
MEMORY = "memory"
OUTPUT_LIMIT = "output_limit"  # wrote more than the stdout/stderr cap (RLIMIT_FSIZE)
CRASHED = "crashed"  # killed by a signal we did not send
EXITED = "exited"  # SystemExit, os._exit or no result at all
EXCEPTION = "exception"
RECURSION = "recursion"
BASE_EXCEPTION = "base_exception"
SANDBOX_ERROR = "sandbox_error"  # the sandbox itself failed (not the candidate's fault)
# what it returned
INVALID_EVENTS = "invalid_events"
UNKNOWN_PARAMS = "unknown_params"
MISSING_PARAMS = "missing_params"
UNKNOWN_OBJECT = "unknown_object"
TOO_MANY_EVENTS = "too_many_events"
OUTPUT_TOO_LARGE = "output_too_large"
# scoring and the database
DEGENERATE_NEVER = "degenerate_never"
DEGENERATE_ALWAYS = "degenerate_always"
DEGENERATE_CONSTANT = "degenerate_constant"  # the same frames on every trace
DUPLICATE = "duplicate"
STALE_ISLAND = "stale_island"  # its island was reset after the prompt was built
LLM_ERROR = "llm_error"
QUARANTINED = "quarantined"  # the sample could not be processed or logged; RUN_DIR/quarantine.jsonl says why

ALL = (
    SYNTAX_ERROR, CONTRACT, WRONG_PATTERN, UNKNOWN_DEPENDENCY, FORBIDDEN_IMPORT, FORBIDDEN_NAME,
    FORBIDDEN_ATTRIBUTE, TOO_LONG, NO_FUNCTION, NOTHING_TO_MUTATE, TIMEOUT, CPU_LIMIT, MEMORY, OUTPUT_LIMIT, CRASHED,
    EXITED, EXCEPTION, RECURSION, BASE_EXCEPTION, SANDBOX_ERROR, INVALID_EVENTS, UNKNOWN_PARAMS,
    MISSING_PARAMS, UNKNOWN_OBJECT, TOO_MANY_EVENTS, OUTPUT_TOO_LARGE, DEGENERATE_NEVER,
    DEGENERATE_ALWAYS, DEGENERATE_CONSTANT, DUPLICATE, STALE_ISLAND, LLM_ERROR, QUARANTINED,
)

# What the LLM should do about each code, for the feedback lines of later prompts.
ADVICE = {
    SYNTAX_ERROR: "write valid Python",
    CONTRACT: "keep PATTERN, DESCRIPTION, DEPENDS, PARAMS and detect(trace, events)",
    WRONG_PATTERN: "do not change PATTERN",
    UNKNOWN_DEPENDENCY: "read only the listed patterns",
    FORBIDDEN_IMPORT: "import only numpy and math",
    FORBIDDEN_NAME: "no open/exec/eval/compile/__import__/globals",
    FORBIDDEN_ATTRIBUTE: "no attributes starting with '_' and no file I/O",
    TOO_LONG: "write shorter code",
    NO_FUNCTION: "answer with the body of the requested function",
    TIMEOUT: "vectorise with numpy; avoid per-frame Python loops over all pairs",
    CPU_LIMIT: "vectorise with numpy",
    MEMORY: "avoid huge arrays",
    OUTPUT_LIMIT: "do not print",
    CRASHED: "avoid deep recursion and huge allocations",
    EXITED: "return a list; never exit",
    EXCEPTION: "guard empty arrays and missing bodies",
    RECURSION: "no recursion",
    BASE_EXCEPTION: "do not raise BaseException",
    INVALID_EVENTS: "return (int frame in range, dict of plain values) pairs",
    UNKNOWN_PARAMS: "emit only the keys in PARAMS",
    MISSING_PARAMS: "every event must carry every key in PARAMS",
    UNKNOWN_OBJECT: "name objects with trace.names",
    TOO_MANY_EVENTS: "emit events at onsets, not every frame",
    OUTPUT_TOO_LARGE: "emit fewer, smaller events",
    DEGENERATE_NEVER: "the detector never fired on any trace",
    DEGENERATE_ALWAYS: "the detector fired on every frame of every trace",
    DEGENERATE_CONSTANT: "the detector fired at the same frames on every trace; it must depend on the trace",
    DUPLICATE: "the events equal an existing program's; try a different idea",
}


MAX_DETAIL = 2000


@dataclass(frozen=True)
class Reason:
    """A rejection: ``code`` is one of the constants above, ``detail`` one short line."""

    code: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.code not in ALL:
            raise ValueError(f"unknown rejection code {self.code!r}")
        # the detail may quote a candidate (an exception message, a value): keep it one
        # encodable line of bounded size, whatever the candidate wrote (lone surrogates included)
        detail = str(self.detail)
        if len(detail) > MAX_DETAIL:
            detail = detail[:MAX_DETAIL - 3] + "..."
        try:
            detail.encode("utf-8")
        except UnicodeEncodeError:
            detail = detail.encode("utf-8", "replace").decode("utf-8")
        object.__setattr__(self, "detail", detail)

    def short(self, width: int = 160) -> str:
        text = f"{self.code}: {' '.join(self.detail.split())}" if self.detail else self.code
        return text if len(text) <= width else text[: width - 3] + "..."

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "detail": self.detail}


class Rejected(SimpatternsError):
    """Raised by static checks; carries the `Reason`."""

    def __init__(self, code: str, detail: str = ""):
        self.reason = Reason(code, detail)
        super().__init__(self.reason.short())


# here, not in `pool`, so a command can catch them without importing the sandbox's machinery
class SandboxError(SimpatternsError, RuntimeError):
    """The sandbox machinery itself failed (not a candidate's fault)."""


class SandboxRefused(SandboxError):
    """This machine gives less than the stated minimum and the user did not pass --unsafe-sandbox."""
