"""streammkl — online proximal multiple kernel learning for event streams."""

from __future__ import annotations

__version__ = "0.1.0"
