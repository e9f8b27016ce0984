"""river's mini-batch API (``learn_many`` / ``predict_many`` / ``predict_proba_many`` on pandas
frames) for the MKL learners: a frame is read as its rows would be by the single-example calls
(a column is a feature, NaN or None is a missing value), then learned in one compiled loop.

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
    infinite value is an error naming its column (nothing is learned)."""
    values = X.to_numpy(dtype=np.float64, na_value=np.nan)
    if values.size and np.isinf(values).any():
        col = names[int(np.flatnonzero(np.isinf(values).any(axis=0))[0])]
        raise ValueError(f"feature {col!r} has a non-finite value")
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


class ClassifierBatches:
    """``learn_many`` / ``predict_proba_many`` / ``predict_many`` for ``MKLClassifier``."""

    def learn_many(self, X: Any, y: Any) -> None:
        """Learn the rows of X in order, as a loop of ``learn_one`` would (in compiled runs
        between rows that bring a new class)."""
        names = frame_columns(X)
        ys = as_list(y)
        if len(ys) != len(X):
            raise ValueError(f"{len(X)} rows but {len(ys)} labels")
        if any(v is None for v in ys):
            raise ValueError("learn_many needs a label for every row")
        learner: Any = self
        i, n = 0, len(ys)
        while i < n:
            label = ys[i]
            index = learner._features.index
            new_input = any(name not in index for name in names)
            if learner.core is None or new_input or label not in learner._class_index:
                row = first_row(X.iloc[i : i + 1], names)
                learner.learn_one(row, label)  # a new class or new inputs: one round
                i += 1
                continue
            j = i
            while j < n and ys[j] in learner._class_index:
                j += 1
            core = learner.core
            rows = frame_rows(X.iloc[i:j], names, learner._features.index, len(learner._features))
            targets = np.array([learner.core_target(v) for v in ys[i:j]], dtype=np.float64)
            core.learn_many_prepared(learner.prepare_rows(rows), targets)
            i = j

    def _frame_scores(self, X: Any) -> np.ndarray | None:
        learner: Any = self
        names = frame_columns(X)
        core = learner.core
        if core is None or len(learner._features) == 0 or not learner.classes_ or not len(X):
            return None
        rows = frame_rows(X, names, learner._features.index, len(learner._features))
        return core.decision_many(learner.scale_rows(rows))

    def predict_proba_many(self, X: Any) -> Any:
        import pandas as pd

        learner: Any = self
        scores = self._frame_scores(X)
        classes = list(learner.classes_)
        if scores is None:
            uniform = 1.0 / len(classes) if classes else 0.0
            return pd.DataFrame(uniform, index=X.index, columns=classes, dtype=float)
        probas = learner.probas_from_scores(scores)
        return pd.DataFrame(probas, index=X.index, columns=classes, dtype=float)

    def predict_many(self, X: Any) -> Any:
        import pandas as pd

        learner: Any = self
        scores = self._frame_scores(X)
        if scores is None:
            first = learner.classes_[0] if learner.classes_ else None
            return pd.Series([first] * len(X), index=X.index, dtype=object)
        return pd.Series([learner.label_of(row) for row in scores], index=X.index, dtype=object)


class RegressorBatches:
    """``learn_many`` / ``predict_many`` for ``MKLRegressor``."""

    def learn_many(self, X: Any, y: Any) -> None:
        """Learn the rows of X in order, as a loop of ``learn_one`` would (the running target
        statistics advance row by row; the rounds run in one compiled loop)."""
        names = frame_columns(X)
        ys = [float(v) for v in as_list(y)]
        if len(ys) != len(X):
            raise ValueError(f"{len(X)} rows but {len(ys)} targets")
        if not all(math.isfinite(v) for v in ys):
            raise ValueError("regression targets must be finite")
        if not ys:
            return
        learner: Any = self
        index = learner._features.index
        start = 0
        if learner.core is None or any(name not in index for name in names):
            learner.learn_one(first_row(X.iloc[:1], names), ys[0])  # declares the new inputs
            start = 1
        if start == len(ys):
            return
        rows = frame_rows(X.iloc[start:], names, learner._features.index, len(learner._features))
        targets = np.array([learner.advance_target(v) for v in ys[start:]], dtype=np.float64)
        learner.core.learn_many_prepared(learner.prepare_rows(rows), targets)

    def predict_many(self, X: Any) -> Any:
        import pandas as pd

        learner: Any = self
        names = frame_columns(X)
        center, scale = learner.target_scale()
        core = learner.core
        if core is None or len(learner._features) == 0 or not len(X):
            return pd.Series(center, index=X.index, dtype=float)
        rows = frame_rows(X, names, learner._features.index, len(learner._features))
        scores = core.decision_many(learner.scale_rows(rows))
        return pd.Series(center + scale * scores[:, 0], index=X.index)
