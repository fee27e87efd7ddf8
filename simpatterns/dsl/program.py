"""`RewardProgram`: text parsed, checked and compiled once, the object the
rest of simpatterns (the CLI, environments, the optimizer, evaluation
harnesses) holds and scores traces with.

One path scores a rollout: ``program.evaluate(annotation, trace)``. Without
an annotation the program annotates the trace itself with only the patterns
it reads (``program.patterns``) and their dependencies, taken from the
library it was checked against; the events of a pattern depend only on the
trace and its dependencies' events, so the score equals the one on the full
library's annotation. A new scene is checked against the body names the
program's one check recorded (`check_bodies`): no re-parse, no re-check.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable, Sequence

from simpatterns.dsl.checker import BodyRef, as_declarations, check_bodies, directed_labels, make_checker
from simpatterns.dsl.errors import DSLError, DSLErrors
from simpatterns.dsl.evaluator import CompiledProgram, EvalResult, build
from simpatterns.dsl.matching import normalize_text
from simpatterns.dsl.parser import parse
from simpatterns.dsl.printer import format_program
from simpatterns.dsl.syntax import Program
from simpatterns.files import atomic_write

if TYPE_CHECKING:
    from simpatterns.annotation import Annotation
    from simpatterns.detectors.library import PatternLibrary
    from simpatterns.trace import Trace

PROGRAM_SUFFIX = ".rwd"


@lru_cache(maxsize=None)
def builtin_library(world: str = "phyre") -> "PatternLibrary":
    """A built-in pattern library, loaded once per process (detectors are
    immutable): ``"phyre"`` (what programs annotate with when compiled without
    a library) or ``"3d"`` (MuJoCo scenes and the rope)."""
    from simpatterns.detectors.library import PatternLibrary

    return PatternLibrary.builtin(world)


class RewardProgram:
    """A checked, compiled reward program.

    ``evaluate(annotation=None, trace=None)`` gives an `EvalResult` (success,
    score in [0, 1], per-clause results, the annotation it read);
    ``patterns`` are the labels it reads; ``clauses`` are the top-level
    clause texts (one ``reward/<term>`` info key each in the environments);
    ``library`` is what it was checked against.
    """

    def __init__(self, text: str, program: Program, compiled: CompiledProgram, path: Path | None = None,
                 library: Any = None, body_refs: Sequence[BodyRef] = ()):
        self.text = text
        self.program = program
        self.compiled = compiled
        self.path = path
        self.library = library
        self.body_refs = tuple(body_refs)
        self._needed: "PatternLibrary | None" = None
        self._build_args: tuple[Any, Any, Any] = (library, None, None)  # what from_parsed checked against

    @classmethod
    def from_text(cls, text: str, signatures: Any = None, bodies: "Sequence[Any] | None" = None,
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
        return cls.from_parsed(program, signatures, bodies, directed)

    @classmethod
    def from_parsed(cls, program: Program, signatures: Any = None, bodies: "Sequence[Any] | None" = None,
                    directed: Collection[str] | None = None) -> "RewardProgram":
        """Check and compile a parsed `Program` (see `from_text`)."""
        checker = make_checker(program, signatures, bodies)
        errors = checker.run()
        if errors:
            raise DSLErrors(errors)
        compiled = build(program, directed_labels(signatures) if directed is None else directed,
                         as_declarations(signatures))
        out = cls(program.source, program, compiled, library=signatures, body_refs=checker.body_refs)
        out._build_args = (signatures, bodies, directed)
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        # the compiled program holds closures: it pickles as its text, compiled again on load
        signatures, bodies, directed = self._build_args
        return (_program_from_pickle, (self.text, self.program.filename, signatures, bodies,
                                       None if directed is None else tuple(directed),
                                       None if self.path is None else str(self.path)))

    @classmethod
    def load(cls, path: str | os.PathLike, signatures: Any = None, bodies: "Sequence[Any] | None" = None,
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

    @classmethod
    def coerce(cls, program: Any, library: Any = None) -> "RewardProgram":
        """A `RewardProgram` from a program object (returned as it is), a ``.rwd``
        path, or program text (checked and compiled against ``library``, the
        built-in library when None). A string that names an existing file, or
        ends in ``.rwd``, is read as a file."""
        if isinstance(program, RewardProgram):
            if library is not None and program.library is not None and library is not program.library:
                raise ValueError("the RewardProgram was compiled against another library; "
                                 "pass its text or path to compile it against this one")
            return program
        lib = builtin_library() if library is None else library
        if isinstance(program, os.PathLike) or (
            isinstance(program, str) and "(" not in program
            and (program.endswith(PROGRAM_SUFFIX) or Path(program).is_file())
        ):
            return cls.load(program, lib)
        if isinstance(program, str):
            return cls.from_text(program, lib)
        raise TypeError(f"reward program must be text, a .rwd path or a RewardProgram, got {type(program).__name__}")

    def save(self, path: str | os.PathLike) -> Path:
        """Write the program text atomically."""
        return atomic_write(path, self.text if self.text.endswith("\n") else self.text + "\n")

    # ------------------------------------------------------------ what it reads
    @property
    def clauses(self) -> list[str]:
        return list(self.compiled.clause_texts)

    @property
    def canonical_text(self) -> str:
        return format_program(self.program)

    @property
    def patterns(self) -> frozenset[str]:
        """Normalised labels of the patterns the program reads (empty when it reads
        only positions and contacts)."""
        return self.compiled.patterns

    @property
    def needs_trace(self) -> bool:
        """True when some clause reads positions (NEARBY_AT): pass the trace."""
        return self.compiled.needs_trace

    def check_bodies(self, names: Sequence[str]) -> list[DSLError]:
        """``unknown-body`` errors of this program in a scene with body ``names``
        (empty when it fits), from the body names its one check recorded."""
        return check_bodies(self.program, self.body_refs, names)

    def require_bodies(self, names: Sequence[str], where: str = "scene") -> None:
        """Raise ValueError (the errors, with positions) unless the program fits
        a scene with body ``names``; ``where`` names the scene in the message."""
        errors = self.check_bodies(names)
        if errors:
            raise ValueError(f"reward program does not fit the {where}:\n{DSLErrors(errors)}")

    # ------------------------------------------------------------------ scoring
    @property
    def needed_library(self) -> "PatternLibrary":
        """The patterns this program reads and their dependencies: the subset of
        its library (the built-in one when it was compiled without a
        `PatternLibrary`) that annotating a trace for it runs. Labels the library
        lacks have no events, on any annotation, and are left out."""
        if self._needed is None:
            from simpatterns.detectors.library import PatternLibrary

            if not self.patterns:
                self._needed = PatternLibrary()
            else:
                lib = self.library if isinstance(self.library, PatternLibrary) else None
                if lib is None and self.library is not None:
                    raise TypeError("a program checked against plain signatures cannot annotate a trace; "
                                    "pass an annotation, or compile it with a PatternLibrary")
                lib = builtin_library() if lib is None else lib
                self._needed = lib.subset(sorted(label for label in self.patterns if label in lib))
        return self._needed

    def covers(self, annotation: "Annotation") -> bool:
        """True when ``annotation`` holds every pattern the program reads that its
        library has (so evaluating on it needs no annotating)."""
        have = {normalize_text(p) for p in annotation.patterns}
        needed = self.needed_library
        return all(label in have for label in self.patterns if label in needed)

    def annotate(self, trace: "Trace") -> "Annotation":
        """Annotate ``trace`` with `needed_library`: what `evaluate` does when
        given a trace without an annotation."""
        from simpatterns.annotate.annotator import annotate

        return annotate(trace, self.needed_library)

    def evaluate(self, annotation: "Annotation | None" = None, trace: "Trace | None" = None,
                 explain: bool = False) -> EvalResult:
        """Success, score and per-clause results of one rollout: the one way a
        program scores. Pass the ``trace`` (positions, contacts) and its
        ``annotation`` when you have one; without an annotation the program
        annotates the trace with the patterns it reads (`annotate`). The
        result's ``annotation`` is the one evaluated. Raises
        `DSLEvaluationError` (e.g. NEARBY_AT without a trace)."""
        if annotation is None and trace is not None:
            annotation = self.annotate(trace)
        result = self.compiled.evaluate(annotation, trace, explain=explain)
        result.annotation = annotation
        return result

    def evaluate_batch(self, annotations: Iterable["Annotation | None"] | None = None,
                       traces: Sequence["Trace | None"] | None = None, explain: bool = False) -> list[EvalResult]:
        """`evaluate` over rollouts (annotations, traces, or both of equal length)."""
        trs = list(traces) if traces is not None else None
        anns = list(annotations) if annotations is not None else [None] * len(trs or [])
        if trs is None:
            trs = [None] * len(anns)
        if len(trs) != len(anns):
            raise ValueError(f"got {len(anns)} annotations but {len(trs)} traces")
        return [self.evaluate(a, t, explain) for a, t in zip(anns, trs)]

    def __call__(self, annotation: "Annotation | None" = None, trace: "Trace | None" = None) -> float:
        """The dense reward alone (`evaluate`'s score)."""
        return self.evaluate(annotation, trace).score

    def __repr__(self) -> str:
        name = f" {self.path.name}" if self.path else ""
        return f"<RewardProgram{name}: {len(self.clauses)} clause(s)>"


def _program_from_pickle(text: str, filename: str, signatures: Any, bodies: Any, directed: Any,
                         path: str | None) -> RewardProgram:
    out = RewardProgram.from_text(text, signatures, bodies, filename=filename, directed=directed)
    out.path = None if path is None else Path(path)
    return out
