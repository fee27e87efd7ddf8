"""`SimpatternsError`: the root of every exception simpatterns raises on purpose.

``except SimpatternsError`` catches any of them; each also keeps its builtin
base (``TraceFormatError`` is a ``ValueError`` too, ``WriteError`` an
``OSError``), so code that catches those goes on working. This module is the
bottom layer: it imports nothing of ours.
"""

from __future__ import annotations


class SimpatternsError(Exception):
    """Base class of simpatterns' exceptions."""
