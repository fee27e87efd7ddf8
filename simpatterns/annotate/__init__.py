"""Running pattern libraries over traces; distances; text and pictures for people and LLMs."""

from simpatterns.annotate.annotation import Annotation, AnnotationFormatError, PatternEvent

__all__ = ["Annotation", "AnnotationFormatError", "PatternEvent"]
