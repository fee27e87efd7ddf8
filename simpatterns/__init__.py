"""simpatterns: annotated physics traces, discovered event detectors and reward programs."""

__version__ = "0.1.0"
