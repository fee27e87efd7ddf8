"""`RewardProgram`: text + parsed + checked + compiled, the object the rest
of simpatterns (environments, annealing, value models) holds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable, Sequence

from simpatterns.dsl.checker import check
from simpatterns.dsl.errors import DSLError, DSLErrors
from simpatterns.dsl.evaluator import CompiledProgram, EvalResult, compile_program
from simpatterns.dsl.parser import parse
from simpatterns.dsl.printer import format_program
from simpatterns.dsl.syntax import Program
from simpatterns.files import atomic_write

if TYPE_CHECKING:
    from simpatterns.annotation import Annotation
    from simpatterns.trace import Trace

PROGRAM_SUFFIX = ".rwd"


class RewardProgram:
    """A checked, compiled reward program.

    ``evaluate(annotation, trace=None)`` gives an `EvalResult` (success,
    score in [0, 1], per-clause results); ``clauses`` are the top-level clause
    texts (one ``reward/<term>`` info key each in the environments).
    """

    def __init__(self, text: str, program: Program, compiled: CompiledProgram, path: Path | None = None):
        self.text = text
        self.program = program
        self.compiled = compiled
        self.path = path

    @classmethod
    def from_text(cls, text: str, signatures: Any = None, bodies: Sequence[str] | None = None,
                  filename: str = "<program>", directed: Collection[str] | None = None) -> "RewardProgram":
        """Parse, check (against ``signatures``/``bodies`` when given) and compile.
        ``signatures`` is a `PatternLibrary` (or a mapping label -> param keys);
        a library's declarations say which pairs are directed (``directed``
        overrides them) and which params name bodies. Raises `DSLErrors`
        carrying every problem found."""
        try:
            program = parse(text, filename=filename)
        except DSLError as exc:
            raise DSLErrors([exc]) from None
        errors = check(program, signatures, bodies)
        if errors:
            raise DSLErrors(errors)
        return cls(text, program, compile_program(program, directed=directed, library=signatures))

    @classmethod
    def load(cls, path: str | os.PathLike, signatures: Any = None, bodies: Sequence[str] | None = None,
             directed: Collection[str] | None = None) -> "RewardProgram":
        """Read a ``.rwd`` file (program text, ``#`` comments allowed)."""
        path = Path(path)
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise DSLErrors([DSLError("io", f"cannot read reward program ({exc})", filename=str(path))]) from None
        out = cls.from_text(text, signatures, bodies, filename=str(path), directed=directed)
        out.path = path
        return out

    def save(self, path: str | os.PathLike) -> Path:
        """Write the program text atomically."""
        return atomic_write(path, self.text if self.text.endswith("\n") else self.text + "\n")

    # ------------------------------------------------------------------ use
    @property
    def clauses(self) -> list[str]:
        return list(self.compiled.clause_texts)

    @property
    def canonical_text(self) -> str:
        return format_program(self.program)

    @property
    def needs_trace(self) -> bool:
        """True when some clause reads positions (NEARBY_AT): pass the trace."""
        return self.compiled.needs_trace

    def evaluate(self, annotation: "Annotation | None", trace: "Trace | None" = None,
                 explain: bool = False) -> EvalResult:
        return self.compiled.evaluate(annotation, trace, explain=explain)

    def evaluate_batch(self, annotations: Iterable["Annotation"], traces: Sequence["Trace | None"] | None = None,
                       explain: bool = False) -> list[EvalResult]:
        return self.compiled.evaluate_batch(annotations, traces, explain=explain)

    def __call__(self, annotation: "Annotation | None", trace: "Trace | None" = None) -> float:
        """The dense reward alone."""
        return self.compiled.score(annotation, trace)[1]

    def __repr__(self) -> str:
        name = f" {self.path.name}" if self.path else ""
        return f"<RewardProgram{name}: {len(self.clauses)} clause(s)>"
