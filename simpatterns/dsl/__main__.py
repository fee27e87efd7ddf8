"""``python -m simpatterns.dsl [--predicates]``: print the DSL reference
(generated from the grammar and the predicate classes)."""

import sys

from simpatterns.dsl.reference_text import predicate_reference, reference_text

# --predicates: the per-predicate section at the heading level docs/reference/dsl.md embeds it
sys.stdout.write(predicate_reference(level=3) if "--predicates" in sys.argv[1:] else reference_text())
