"""The detector contract, the pattern library and the built-in guided library."""

from simpatterns.detectors.contract import (
    Detector,
    DetectorError,
    load_detector,
    normalize_label,
    validate_events,
)

__all__ = ["Detector", "DetectorError", "load_detector", "normalize_label", "validate_events"]
