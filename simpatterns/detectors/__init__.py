"""The detector contract, the pattern library and the built-in guided library."""

from simpatterns.detectors.contract import (
    Candidate,
    Declarations,
    Detector,
    DetectorError,
    load_detector,
    normalize_label,
    validate_events,
)
from simpatterns.detectors.library import LibraryError, PatternLibrary

__all__ = [
    "Candidate",
    "Declarations",
    "Detector",
    "DetectorError",
    "LibraryError",
    "PatternLibrary",
    "load_detector",
    "normalize_label",
    "validate_events",
]
