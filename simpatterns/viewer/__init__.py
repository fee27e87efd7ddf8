"""Browser viewer of traces: one self-contained HTML page per trace (scene, playback, event
timeline, reward program, Q&A and agent records) and an index page for a dataset folder."""

from simpatterns.viewer.build import dataset_pages, trace_page
from simpatterns.viewer.page import TracePage

__all__ = ["TracePage", "dataset_pages", "trace_page"]
