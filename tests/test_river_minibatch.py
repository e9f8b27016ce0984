"""river's mini-batch API on pandas frames: the same model as the loop of single calls."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import losses
from streammkl.river import MKLClassifier, MKLRegressor

pd = pytest.importorskip("pandas")


def _frame(n, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    X.loc[rng.random(n) < 0.1, "b"] = np.nan  # missing values
    return X


def _rows(X):
    return [
        {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()}
        for row in X.to_dict(orient="records")
    ]


@pytest.mark.parametrize("loss", [None, losses.Hinge(), losses.MulticlassHinge()])
def test_classifier_learn_many_equals_the_loop_of_learn_one(loss):
    X = _frame(300)
    if isinstance(loss, losses.Hinge):
        y = pd.Series(np.where(X["a"] > 0, "yes", "no"))
    else:  # classes appear mid-batch: the third only after row 150
        y = pd.Series(np.where(X["a"] > 0, "yes", "no"))
        y.loc[(y.index >= 150) & (X["c"] > 1.0)] = "maybe"
    batch, loop = MKLClassifier(loss=loss), MKLClassifier(loss=loss)
    batch.learn_many(X[:120], y[:120])
    batch.learn_many(X[120:], y[120:])
    for x, label in zip(_rows(X), y, strict=True):
        loop.learn_one(x, label)
    assert batch.classes_ == loop.classes_
    assert len(batch.classes_) == (2 if isinstance(loss, losses.Hinge) else 3)
    assert batch.rounds().digest() == loop.rounds().digest()
    proba = batch.predict_proba_many(X)
    assert list(proba.columns) == batch.classes_ and list(proba.index) == list(X.index)
    for i, x in enumerate(_rows(X)):
        assert proba.iloc[i].to_dict() == pytest.approx(loop.predict_proba_one(x), abs=1e-12)
    labels = batch.predict_many(X)
    assert labels.tolist() == [loop.predict_one(x) for x in _rows(X)]


def test_regressor_learn_many_equals_the_loop_of_learn_one():
    X = _frame(250, seed=1)
    y = pd.Series(3.0 * X["a"].fillna(0) - X["c"] + 100.0)
    batch, loop = MKLRegressor(), MKLRegressor()
    batch.learn_many(X, y)
    for x, target in zip(_rows(X), y, strict=True):
        loop.learn_one(x, target)
    assert batch.rounds().digest() == loop.rounds().digest()
    np.testing.assert_allclose(
        batch.predict_many(X).to_numpy(), [loop.predict_one(x) for x in _rows(X)], rtol=1e-12
    )


def test_unfitted_and_bad_frames():
    X = _frame(5)
    clf = MKLClassifier()
    assert clf.predict_many(X).tolist() == [None] * 5
    assert clf.predict_proba_many(X).shape == (5, 0)
    assert MKLRegressor().predict_many(X).tolist() == [0.0] * 5
    with pytest.raises(TypeError, match="pandas DataFrame"):
        clf.learn_many([{"a": 1.0}], ["x"])
    with pytest.raises(TypeError, match="column 'name' is not numeric"):
        clf.learn_many(pd.DataFrame({"name": ["x", "y"]}), pd.Series([1, 2]))
    with pytest.raises(ValueError, match="2 rows but 3 labels"):
        clf.learn_many(X[:2], pd.Series([1, 2, 3]))
    bad = X.copy()
    bad.iloc[0, 0] = np.inf
    digest = clf.rounds().digest()
    with pytest.raises(ValueError, match="non-finite"):
        clf.learn_many(bad, pd.Series(["a"] * 5))
    assert clf.rounds().digest() == digest
