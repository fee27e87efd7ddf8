"""Running pattern libraries over traces; distances; text and pictures for people and LLMs.

`Annotation`, `PatternEvent` and `AnnotationFormatError` live in `simpatterns.annotation`
(the contract every layer shares) and are re-exported here for convenience.
"""

from simpatterns.annotate.annotator import annotate, annotate_iter, annotate_many, run_detector
from simpatterns.annotate.incremental import IncrementalAnnotator
from simpatterns.annotate.sandboxed import SandboxPolicy
from simpatterns.annotation import Annotation, AnnotationFormatError, PatternEvent

__all__ = ["Annotation", "AnnotationFormatError", "IncrementalAnnotator", "PatternEvent", "SandboxPolicy", "annotate",
           "annotate_iter", "annotate_many", "run_detector"]
