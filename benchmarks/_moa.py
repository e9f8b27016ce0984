"""MOA's learners (Java, through CapyMOA) as river learners, for ``benchmarks/river_suite.py``.

CapyMOA (PyPI ``capymoa``, the ``moa`` extra) ships MOA's jar in its wheel and starts a JVM
through JPype when it is first imported; it needs a Java runtime (Debian's
``default-jre-headless``: ``bash benchmarks/install-java.sh``). :func:`unavailable` says why the
MOA rows cannot run on this machine, and the suite prints that reason in their place.

A MOA learner reads instances described by a *schema* (attribute names and types, the class
labels). The suite materialises every stream before it runs, so :class:`CapyMOAClassifier` is built
with the stream's feature names (first-appearance order; every feature numeric, as every other
learner of the suite sees it) and, for classification, its labels in sorted order (the order
MOA's ARFF headers would list them; MOA breaks ties of its votes by the lower index). A label
outside the schema is refused with ``ValueError``, never mapped to another; MOA itself only ever
votes for the classes it has been trained on so far, and where it has no vote it predicts the
first class, as MOA's own evaluators score it.

Each river dict becomes a MOA ``DenseInstance`` once per example: ``predict_one`` converts it
(class missing), and ``learn_one`` on the same dict sets the class on that instance and trains.
The conversion is timed apart (``conversion_seconds``) inside the suite's timed loop, so the
suite reports MOA's throughput end to end and without our conversion.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import math
import os
import shutil
import time
from collections.abc import Sequence
from typing import Any

from river import base

CLASSIFIERS = {  # suite key -> (CapyMOA class in capymoa.classifier, row label)
    "arf": ("AdaptiveRandomForestClassifier", "MOA AdaptiveRandomForest"),
    "srp": ("StreamingRandomPatches", "MOA StreamingRandomPatches"),
    "hat": ("HoeffdingAdaptiveTree", "MOA HoeffdingAdaptiveTree"),
    "knn": ("KNN", "MOA kNN"),
    "ob": ("OnlineBagging", "MOA OnlineBagging"),
    "lb": ("LeveragingBagging", "MOA LeveragingBagging"),
    "nb": ("NaiveBayes", "MOA NaiveBayes"),
}
REGRESSORS = {  # suite key -> (CapyMOA class in capymoa.regressor, row label)
    "soknl": ("SOKNL", "MOA SOKNL"),
    "arf": ("AdaptiveRandomForestRegressor", "MOA AdaptiveRandomForest regressor"),
    "knn": ("KNNRegressor", "MOA kNN regressor"),
}
INSTALL_JAVA = "`bash benchmarks/install-java.sh` (Debian's default-jre-headless)"
INSTALL_CAPYMOA = "`.venv/bin/pip install -e '.[moa]'`"


@functools.cache
def unavailable() -> str:
    """Why MOA's rows cannot run here ("" when they can). Starts the JVM when they can."""
    if importlib.util.find_spec("capymoa") is None:
        return f"not run: CapyMOA is not installed ({INSTALL_CAPYMOA})"
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        return f"not run: no Java runtime on this machine ({INSTALL_JAVA})"
    try:
        import capymoa  # noqa: F401  (starts the JVM)
    except Exception as exc:  # CapyMOA's own error names the cause (Java too old, no jar...)
        return f"not run: CapyMOA could not start MOA: {exc}"
    return ""


def version() -> str:
    """CapyMOA's, MOA's, JPype's and Java's versions (the JVM must be started)."""
    import capymoa
    import jpype

    info = str(jpype.JClass("moa.core.Globals").getWorkbenchInfoString())
    moa = next((ln.split()[1] for ln in info.splitlines() if ln.startswith("Version")), "?")
    java = jpype.java.lang.System.getProperty("java.version")
    return f"CapyMOA {capymoa.__version__} (MOA {moa}, JPype {jpype.__version__}, Java {java})"


def learner_class(task: str, key: str) -> Any:
    """The CapyMOA class of a suite key (``task``: "classification" or "regression")."""
    if task == "regression":
        from capymoa import regressor

        return getattr(regressor, REGRESSORS[key][0])
    from capymoa import classifier

    return getattr(classifier, CLASSIFIERS[key][0])


def defaults(cls: Any) -> str:
    """The numeric and string defaults of a CapyMOA learner's constructor, as ``k=v`` pairs."""
    shown = []
    for name, p in inspect.signature(cls).parameters.items():
        if name in ("schema", "CLI", "random_seed") or p.default is inspect.Parameter.empty:
            continue
        if isinstance(p.default, int | float | str) and not isinstance(p.default, bool):
            shown.append(f"{name}={p.default}")
    return ", ".join(shown) or "no options"


def sorted_labels(labels: Sequence[Any]) -> list[Any]:
    """The distinct labels in their natural order (by ``repr`` where they do not compare)."""
    distinct = list(dict.fromkeys(labels))
    try:
        return sorted(distinct)
    except TypeError:
        return sorted(distinct, key=repr)


class CapyMOALearner:
    """One CapyMOA learner fed river dicts: the base of the two classes below.

    Parameters
    ----------
    key
        A key of ``CLASSIFIERS`` or ``REGRESSORS``.
    features
        The schema's attributes, in order; a key of ``x`` outside them is ignored, and a
        feature missing from ``x`` is a MOA missing value (NaN).
    classes
        The class labels (classification) or None (regression).
    seed
        CapyMOA's ``random_seed``; every other option keeps CapyMOA's default.
    """

    def __init__(self, key: str, features: Sequence[Any], classes: Sequence[Any] | None, seed: int):
        from capymoa.core import Instance
        from capymoa.stream import Schema
        from com.yahoo.labs.samoa.instances import DenseInstance
        from jpype import JArray, JDouble
        from moa.core import InstanceExample

        self.key = key
        self.seed = seed
        self.features = list(features)
        self.classes = None if classes is None else list(classes)
        names = [str(f) for f in self.features]
        target = _unused("class", names)
        labels = None if self.classes is None else [str(c) for c in self.classes]
        if len(set(names)) < len(names) or (labels and len(set(labels)) < len(labels)):
            raise ValueError(f"MOA needs distinct names: features {names}, classes {labels}")
        cats = {} if labels is None else {target: labels}
        self.schema = Schema.from_custom([*names, target], target, cats, name="river")
        self._index = {c: i for i, c in enumerate(self.classes or ())}
        task = "regression" if self.classes is None else "classification"
        self.learner = learner_class(task, key)(schema=self.schema, random_seed=seed)
        self._header = self.schema.get_moa_header()
        self._java = (DenseInstance, JArray(JDouble), InstanceExample, Instance)
        self._last: tuple[dict, Any] | None = None
        self.conversion_seconds = 0.0
        self.conversions = 0  # dicts converted: one per example when learn_one follows predict_one

    def _convert(self, x: dict) -> Any:
        """x as a CapyMOA instance (class missing); its time is added to conversion_seconds."""
        start = time.perf_counter()
        dense, array, example, instance = self._java
        values = [float(x.get(f, math.nan)) for f in self.features]
        values.append(math.nan)
        java = dense(1.0, array(values))
        java.setDataset(self._header)
        out = instance.from_java_instance(self.schema, example(java))
        self.conversion_seconds += time.perf_counter() - start
        self.conversions += 1
        return out

    def _labelled(self, x: dict, target: float) -> Any:
        """The instance of ``x`` (the one just predicted, if it is the same dict) with its
        class or target set."""
        last = self._last
        inst = last[1] if last is not None and last[0] is x else self._convert(x)
        self._last = None
        start = time.perf_counter()
        inst.java_instance.getData().setClassValue(target)
        self.conversion_seconds += time.perf_counter() - start
        return inst

    def _predict(self, x: dict) -> Any:
        inst = self._convert(x)
        self._last = (x, inst)
        return self.learner.predict(inst)


class CapyMOAClassifier(CapyMOALearner, base.Classifier):
    """A CapyMOA classifier as a river classifier (``predict_one`` / ``learn_one``)."""

    def learn_one(self, x: dict, y: Any) -> None:
        index = self._index.get(y)
        if index is None:
            raise ValueError(f"CapyMOAClassifier: class {y!r} is not in the schema {self.classes}")
        self.learner.train(self._labelled(x, float(index)))

    def predict_one(self, x: dict) -> Any:
        """The class MOA votes for; with no votes (nothing learned yet, or ARF's trees before
        they have accuracy estimates) the first class, as MOA's own evaluators take it
        (``Utils.maxIndex`` of an empty or all-zero vote array; CapyMOA returns None there)."""
        index = self._predict(x)
        return self.classes[0 if index is None else index]  # type: ignore[index]


class CapyMOARegressor(CapyMOALearner, base.Regressor):
    """A CapyMOA regressor as a river regressor (``predict_one`` / ``learn_one``)."""

    def __init__(self, key: str, features: Sequence[Any], seed: int):
        super().__init__(key, features, None, seed)

    def learn_one(self, x: dict, y: Any) -> None:
        self.learner.train(self._labelled(x, float(y)))

    def predict_one(self, x: dict) -> float:
        return float(self._predict(x))


def _unused(name: str, taken: Sequence[str]) -> str:
    while name in taken:
        name = f"_{name}"
    return name
