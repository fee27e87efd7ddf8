"""The reward DSL (paper §3.3): natural-language goals become programs such as

    AND(
        EVENT("collision start", {"object_a": "green ball", "object_b": "*"}),
        NEARBY_AT("green ball", x=140, y=10, t=1.0),
    )

that give a boolean success and a dense reward in [0, 1] on an annotated
trace. ``docs/reference/dsl.md`` is the language reference; `reference_text` is the
same reference generated from the code, for LLM prompts.
"""

from simpatterns.dsl.checker import check
from simpatterns.dsl.errors import DSLError, DSLErrors, DSLEvaluationError, DSLSyntaxError
from simpatterns.dsl.evaluator import CompiledProgram, EvalResult, compile_program
from simpatterns.dsl.parser import grammar_text, parse, predicate_names
from simpatterns.dsl.predicates import PREDICATES, ClauseResult
from simpatterns.dsl.printer import format_expr, format_program
from simpatterns.dsl.program import PROGRAM_SUFFIX, RewardProgram, builtin_library
from simpatterns.dsl.reference_text import reference_text
from simpatterns.dsl.syntax import Program

__all__ = [
    "PREDICATES", "PROGRAM_SUFFIX", "ClauseResult", "CompiledProgram", "DSLError", "DSLErrors",
    "DSLEvaluationError", "DSLSyntaxError", "EvalResult", "Program", "RewardProgram", "builtin_library", "check",
    "compile_program", "format_expr", "format_program", "grammar_text", "parse", "predicate_names",
    "reference_text",
]
