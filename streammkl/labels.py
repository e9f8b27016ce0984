"""What may be a class label: the one rule of the learners and of the daemon's decoder.

The classifiers and the sequence labeler keep a dict from label to class index, so a label must
be equal to itself. NaN is not (``nan != nan``): a dict finds a NaN only by identity, so 25
records labelled NaN once made 25 classes. Such a label is refused, by the learners with a
``ValueError`` that changes nothing (the river contract: a refused ``learn_one`` changes
nothing) and by :func:`streammkl.wire.decode` as a ``non_finite`` dead letter -- both through
:func:`self_unequal`: NaN of any kind (``float``, numpy, ``decimal``, complex), also inside a
tuple (whose comparison takes an element as equal to itself by identity, NaN or not).

A label whose comparison raises (e.g. a numpy array) is left to the caller's own checks
(hashing refuses it). Regression targets follow their own rule (a finite number).
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_label", "self_unequal"]

_CONTAINERS = (tuple, frozenset)  # hashable containers (a tuple of types: the quickest check)


def self_unequal(label: Any) -> bool:
    """Whether ``label`` is not equal to itself (NaN), or is a tuple or frozenset holding such a
    value.

    >>> self_unequal(float("nan")), self_unequal(("a", float("nan"))), self_unequal("nan")
    (True, True, False)
    """
    try:
        if label == label:  # (a tuple is equal to itself by identity: its items are asked)
            return isinstance(label, _CONTAINERS) and any(self_unequal(i) for i in label)
    except Exception:  # no usable comparison (e.g. an array's truth value): hashing refuses it
        return False
    return True


def check_label(label: Any, where: str = "label") -> None:
    """Raise ``ValueError`` (naming ``where``) if ``label`` cannot be a class (see
    :func:`self_unequal`)."""
    if self_unequal(label):
        raise ValueError(
            f"{where} {label!r} is not equal to itself (NaN): it cannot be a class (every NaN "
            "would be a new one)"
        )
