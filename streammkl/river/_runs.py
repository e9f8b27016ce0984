"""Compiled runs of :class:`~streammkl.river.MKLClassifier`: finding the longest run of examples
the core can learn in one compiled loop (known class, no new feature), as dense rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from streammkl.river._features import check_numeric

if TYPE_CHECKING:
    from streammkl.river.classifier import MKLClassifier

_PLAIN = frozenset({str, bool, int, float})  # label types that hash as themselves
#: Cells (rows x known features) of one compiled run: 1 M = 8 MB as an array. With 10,000
#: features, planning a 2,000-record run took 305 MiB (16 MiB with the cap; measured with
#: tracemalloc), twice over while the daemon pipelines two batches.
_RUN_CELLS = 1 << 20


def known_run(
    learner: MKLClassifier, xs: Sequence[Mapping], ys: Sequence[Any], i: int, validated: bool
) -> tuple[int, list[Any], list[float]]:
    """The longest run from ``i`` of labelled examples whose class is known and whose features
    are all known (missing ones count as 0): ``(end, rows, targets)``, rows dense over the
    learner's features in their order, targets in the core's conventions. Reads the learner
    only; :meth:`MKLClassifier.plan_run` turns it into arrays."""
    model = learner._model
    names = learner._features.names
    d = len(names)
    if model is None or not model.built or d == 0 or not learner.classes_:
        return i, [], []
    get = itemgetter(*names) if d > 1 else (lambda x, k=names[0]: (x[k],))
    columns = learner._features.index
    index = learner._class_index
    binary = learner._binary_loss
    limit = 2 if binary else model.n_outputs
    rows: list[Any] = []
    targets: list[float] = []
    # a run holds at most _RUN_CELLS inputs (its rows are dense over every known feature):
    # a wide model's runs are shorter, never a batch-sized block of memory
    n = min(len(xs), i + max(1, _RUN_CELLS // d))
    j = i
    while j < n:
        x, y = xs[j], ys[j]
        k = index.get(y) if type(y) in _PLAIN else None
        if k is None or k >= limit:
            break
        if len(x) == d:
            try:
                row = get(x)
            except KeyError:  # a new feature: the single calls widen the model
                break
        elif len(x) < d and x.keys() <= columns.keys():  # missing features count as 0
            row = tuple([x.get(name, 0.0) for name in names])
        else:
            break
        if not validated:
            try:
                check_numeric(x)
            except (TypeError, ValueError):
                break  # learn_one raises the error, naming the feature
        rows.append(row)
        targets.append((1.0 if k == 1 else -1.0) if binary else float(k))
        j += 1
    return j, rows, targets
