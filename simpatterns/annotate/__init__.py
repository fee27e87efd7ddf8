"""Running pattern libraries over traces; distances; text and pictures for people and LLMs."""

from simpatterns.annotate.annotation import Annotation, AnnotationFormatError, PatternEvent
from simpatterns.annotate.annotator import annotate, annotate_many, run_detector

__all__ = ["Annotation", "AnnotationFormatError", "PatternEvent", "annotate", "annotate_many", "run_detector"]
