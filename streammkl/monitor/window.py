"""The last W examples and their online objective terms, in bounded memory, O(1) per example.

Rows are written into a *chunk* of ``every`` rows; a full chunk is frozen (never written again)
and kept while it may still overlap the window, so a consumer on another thread can read frozen
chunks without a lock or a copy on the learning thread. Per row: the input vector, the target, and
the terms ``(loss, lambda Omega(theta_t), eta_t, ||phi(x_t)||^2)``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

LOSS, REG, ETA, PHI_SQ = range(4)
N_TERMS = 4


class Chunk:
    """Up to ``size`` rows; frozen (read-only from then on) once full."""

    __slots__ = ("X", "Y", "n", "terms")

    def __init__(self, size: int, d: int) -> None:
        self.X = np.zeros((size, d))
        self.Y = np.empty(size)
        self.terms = np.empty((size, N_TERMS))
        self.n = 0

    def append(self, x: np.ndarray, y: float, terms: tuple[float, float, float, float]) -> None:
        d = x.shape[0]
        if d > self.X.shape[1]:  # new inputs appeared (dict streams): widen, rarely
            wider = np.zeros((self.X.shape[0], d))
            wider[:, : self.X.shape[1]] = self.X
            self.X = wider
        row = self.X[self.n]
        row[:d] = x
        row[d:] = 0.0
        self.Y[self.n] = y
        self.terms[self.n] = terms
        self.n += 1

    def append_many(self, X: np.ndarray, Y: np.ndarray, terms: np.ndarray) -> None:
        """:meth:`append` of each row of X (with ``Y``, ``terms`` (k, 4)); they must fit."""
        k, d = X.shape
        if d > self.X.shape[1]:
            wider = np.zeros((self.X.shape[0], d))
            wider[:, : self.X.shape[1]] = self.X
            self.X = wider
        rows = self.X[self.n : self.n + k]
        rows[:, :d] = X
        rows[:, d:] = 0.0
        self.Y[self.n : self.n + k] = Y
        self.terms[self.n : self.n + k] = terms
        self.n += k


@dataclass(frozen=True)
class WindowData:
    """A window cut from frozen chunks: the consumer's private arrays."""

    end: int  # examples observed when the window was cut; the window is [end - n, end)
    X: np.ndarray
    Y: np.ndarray
    terms: np.ndarray  # (n, 4): loss, reg, eta, ||phi||^2

    @property
    def n(self) -> int:
        return int(self.Y.shape[0])


class ExampleWindow:
    """Keeps the last ``window`` examples in chunks of ``chunk`` rows.

    Parameters
    ----------
    window
        W, the number of examples a cut holds (fewer until W have been seen).
    chunk
        Rows per chunk; a cut is available each time a chunk fills (every ``chunk`` examples).
    """

    def __init__(self, window: int, chunk: int) -> None:
        if int(window) != window or window < 2:
            raise ValueError(f"window must be an integer >= 2, got {window!r}")
        if int(chunk) != chunk or not 1 <= chunk <= window:
            raise ValueError(f"every must be an integer in [1, window={window}], got {chunk!r}")
        self.window = int(window)
        self.chunk = int(chunk)
        self.n_seen = 0
        self._frozen: deque[Chunk] = deque(maxlen=math.ceil(self.window / self.chunk))
        self._current: Chunk | None = None

    def append(self, x: np.ndarray, y: float, terms: tuple[float, float, float, float]) -> bool:
        """Store one example; True when a chunk has just been frozen (a new cut is available)."""
        if self._current is None:
            self._current = Chunk(self.chunk, x.shape[0])
        self._current.append(x, y, terms)
        self.n_seen += 1
        if self._current.n == self.chunk:
            self._frozen.append(self._current)
            self._current = None
            return True
        return False

    def append_many(
        self, X: np.ndarray, Y: np.ndarray, terms: np.ndarray
    ) -> list[tuple[tuple[Chunk, ...], int]]:
        """Store the rows of X in order (``terms`` (n, 4)), exactly as :meth:`append` row by row
        would; for each chunk frozen on the way, the cut it made available: the frozen chunks
        then and the examples seen then (what :meth:`cut` takes)."""
        cuts = []
        i, n = 0, X.shape[0]
        while i < n:
            if self._current is None:
                self._current = Chunk(self.chunk, X.shape[1])
            current = self._current
            k = min(n - i, self.chunk - current.n)
            current.append_many(X[i : i + k], Y[i : i + k], terms[i : i + k])
            self.n_seen += k
            i += k
            if current.n == self.chunk:
                self._frozen.append(current)
                self._current = None
                cuts.append((self.frozen(), self.n_seen))
        return cuts

    def frozen(self) -> tuple[Chunk, ...]:
        """References to the frozen chunks (O(W / chunk)); safe to hand to another thread."""
        return tuple(self._frozen)

    @property
    def n_chunks(self) -> int:
        return len(self._frozen) + (self._current is not None)

    def cut(self, chunks: tuple[Chunk, ...] | None = None, end: int | None = None) -> WindowData:
        """The last W frozen rows as fresh arrays (run this on the consumer's thread)."""
        chunks = self.frozen() if chunks is None else chunks
        end = self.n_seen - (self._current.n if self._current else 0) if end is None else end
        if not chunks:
            return WindowData(end, np.zeros((0, 0)), np.zeros(0), np.zeros((0, N_TERMS)))
        d = max(c.X.shape[1] for c in chunks)
        X = np.zeros((sum(c.n for c in chunks), d))
        row = 0
        for c in chunks:
            X[row : row + c.n, : c.X.shape[1]] = c.X[: c.n]
            row += c.n
        Y = np.concatenate([c.Y[: c.n] for c in chunks])
        terms = np.concatenate([c.terms[: c.n] for c in chunks])
        keep = slice(max(0, Y.shape[0] - self.window), None)
        return WindowData(end, X[keep], Y[keep], terms[keep])
