"""ONE global conformance test: river.checks on every public learner x every _unit_test_params()."""

from __future__ import annotations

import inspect

import pytest
from river import base
from river import checks as river_checks

import streammkl.river as pkg


def _learners():
    return [
        cls
        for _, cls in inspect.getmembers(pkg, inspect.isclass)
        if issubclass(cls, base.Estimator) and cls.__module__.startswith("streammkl.")
    ]


def _cases():
    for cls in _learners():
        for i, params in enumerate(cls._unit_test_params()):
            model = cls(**params)
            for check in river_checks.yield_checks(model):
                if check.__name__ in model._unit_test_skips():
                    continue
                yield pytest.param(model, check, id=f"{cls.__name__}[{i}]-{check.__name__}")


def test_every_public_learner_is_checked():
    assert {c.__name__ for c in _learners()} == {
        "LambdaChoiceClassifier",
        "MKLClassifier",
        "MKLRegressor",
        "MemoryClassifier",
        "MemoryRegressor",
    }
    assert all(not cls()._unit_test_skips() for cls in _learners())  # nothing skipped


@pytest.mark.parametrize(("model", "check"), list(_cases()))
def test_river_check(model, check):
    check(model.clone())
