"""Reading river's mini-batches (pandas frames) for the MKL learners' ``learn_many`` /
``predict_many`` / ``predict_proba_many``: a frame is read as its rows would be by the
single-example calls (a column is a feature, NaN or None is a missing value), as dense rows the
core learns in one compiled loop.

``learn_many(X, y)`` ends exactly where the loop ``for x, y in rows: learn_one(x, y)`` ends (the
same classes in the same order, the same features, the same model digest); predictions are
``predict_one`` / ``predict_proba_one`` of each row on the model as it is. pandas is needed only
here (the ``pandas`` extra).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streammkl.core.model import MAX_ABS_INPUT


def _frame(X: Any) -> Any:
    if not (hasattr(X, "columns") and hasattr(X, "to_numpy") and hasattr(X, "index")):
        raise TypeError(
            f"learn_many / predict_many take a pandas DataFrame (river's mini-batch API), got "
            f"{type(X).__name__}; for lists of dicts use learn_predict_many or a loop of "
            "learn_one"
        )
    return X


def frame_columns(X: Any) -> list[str]:
    """The frame's column names as feature names, after checking every column is numeric."""
    X = _frame(X)
    names = [c if isinstance(c, str) else str(c) for c in X.columns]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate column names: {names}")
    for col, dtype in zip(names, X.dtypes, strict=True):
        if dtype.kind not in "biuf":
            raise TypeError(
                f"column {col!r} is not numeric ({dtype}); encode it first "
                "(e.g. river.preprocessing.OneHotEncoder)"
            )
    return names


def frame_rows(X: Any, names: Sequence[str], index: Mapping[str, int], width: int) -> np.ndarray:
    """Dense rows (n, width) in the model's column order: missing values (NaN) count as 0,
    columns the model does not know are left out (as ``predict_one`` ignores them); an
    infinite value, or one beyond ``+-MAX_ABS_INPUT``, is an error naming its column (nothing is
    learned)."""
    values = X.to_numpy(dtype=np.float64, na_value=np.nan)
    big = np.abs(values) > MAX_ABS_INPUT  # +-Inf too; NaN (missing) is not
    if values.size and big.any():
        col = names[int(np.flatnonzero(big.any(axis=0))[0])]
        raise ValueError(
            f"feature {col!r} has a non-finite value or one beyond +-{MAX_ABS_INPUT:g}"
        )
    rows = np.zeros((values.shape[0], width))
    for j, name in enumerate(names):
        k = index.get(name)
        if k is not None:
            rows[:, k] = np.nan_to_num(values[:, j], nan=0.0)
    return rows


def first_row(X: Any, names: Sequence[str]) -> dict[str, Any]:
    """The first row as ``learn_one`` would see it (missing values as None)."""
    row = X.iloc[0].tolist()
    return {
        name: None if v is None or (isinstance(v, float) and math.isnan(v)) else v
        for name, v in zip(names, row, strict=True)
    }


def as_list(y: Any) -> list[Any]:
    values = y.tolist() if hasattr(y, "tolist") else list(y)
    return [v.item() if isinstance(v, np.generic) else v for v in values]
