"""The detector contract, the pattern library and the built-in guided library."""

from simpatterns.detectors.contract import (
    Detector,
    DetectorError,
    load_detector,
    normalize_label,
    validate_events,
)
from simpatterns.detectors.library import LibraryError, PatternLibrary

__all__ = [
    "Detector",
    "DetectorError",
    "LibraryError",
    "PatternLibrary",
    "load_detector",
    "normalize_label",
    "validate_events",
]
