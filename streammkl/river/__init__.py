"""river-compatible learners over the streammkl core (``learn_one`` / ``predict_one``)."""

from __future__ import annotations

from streammkl.river.classifier import MKLClassifier
from streammkl.river.lambda_choice import LambdaChoiceClassifier
from streammkl.river.memory_classifier import MemoryClassifier
from streammkl.river.memory_regressor import MemoryRegressor
from streammkl.river.regressor import MKLRegressor

__all__ = [
    "LambdaChoiceClassifier",
    "MKLClassifier",
    "MKLRegressor",
    "MemoryClassifier",
    "MemoryRegressor",
]
