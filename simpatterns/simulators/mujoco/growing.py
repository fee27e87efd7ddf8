"""`GrowingArrays`: named arrays that grow along their first axis and are handed out as
read-only views of their first rows, so the trace of an episode after every step costs
its new rows, not a copy of all of them.

A row that was handed out is never changed: writing different values over it (the
recorder rewrites the last frame of the trace it gave, which ended with the state
reached, when the next step records that state with its own push) moves that array to a
new buffer first, copying the rows before the write (the earlier views keep the old
one). Writes that change nothing, and rows never handed out, are written in place.
Buffers double when full, so growing copies each row O(1) times; an array whose
handed-out last row differs at every step (the rope's contact impulses, a few kB) is
copied at every step.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GrowingArrays"]


class GrowingArrays:
    """Arrays by name, each ``[rows, ...]`` in a buffer with spare rows (see the module docstring)."""

    MIN_ROWS = 16

    def __init__(self) -> None:
        self._data: dict[str, np.ndarray] = {}
        self._shown: dict[str, int] = {}  # rows of each buffer handed out in views

    def put(self, name: str, at: int, values: np.ndarray) -> None:
        """Rows ``at`` to ``at + len(values)`` of ``name`` become ``values`` (the rows before
        ``at`` stay; ``at`` is at most the rows written so far). Values of a wider dtype
        than the rows before widen the array (as a concatenation would)."""
        data = self._data.get(name)
        end = at + len(values)
        if data is None:
            data = self._moved(name, values, 0, end, values.dtype)
        elif data.shape[1:] != values.shape[1:]:
            raise ValueError(f"{name}: rows of shape {values.shape[1:]} cannot follow rows of shape {data.shape[1:]}")
        else:
            dtype = np.result_type(data.dtype, values.dtype)
            seen = min(self._shown[name], end) - at  # rows handed out that this write covers
            if dtype != data.dtype or (
                seen > 0 and not _same_bytes(data[at : at + seen], values[:seen].astype(dtype, copy=False))
            ):
                data = self._moved(name, data, at, max(len(data), end), dtype)
            elif end > len(data):
                data = self._moved(name, data, at, 2 * end, dtype)
        data[at:end] = values

    def view(self, name: str, rows: int) -> np.ndarray:
        """The first ``rows`` rows of ``name``, read-only (they are never written again)."""
        v = self._data[name][:rows]
        v.flags.writeable = False
        self._shown[name] = max(self._shown[name], rows)
        return v

    def _moved(self, name: str, data: np.ndarray, keep: int, rows: int, dtype: np.dtype) -> np.ndarray:
        """A new buffer of ``rows`` rows at least, holding the first ``keep`` rows of ``data``."""
        new = np.empty((max(rows, self.MIN_ROWS),) + data.shape[1:], dtype=dtype)
        new[:keep] = data[:keep]
        self._data[name], self._shown[name] = new, 0
        return new


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit (NaN equals the same NaN; 0.0 differs from -0.0)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
