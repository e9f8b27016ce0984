"""Dict inputs as river streams them -> dense vectors for the core.

Feature names get a column when first seen (a batch of new names is sorted, so the order of keys
in a dict never matters); a missing feature is 0; ``None`` means missing; a non-numeric value,
a non-finite one or one beyond ``+-MAX_ABS_INPUT`` (1e100) is an error naming the feature. The
vector is a fresh array: the learner never keeps a reference to the caller's dict (the one-record
memo below keeps a copy of it).

The one-record memo: ``predict_proba_one`` then ``learn_one`` on the same record (river's
prequential loop; through a pipeline, two equal dicts: ``BagOfWords`` makes a new ``Counter`` per
call) would map the record twice. :meth:`FeatureIndex.known_vector` keeps the vector a prediction
mapped, with a copy of the dict (or, when some name had no column, those names: the learning call
of a known class then admits them without checking the record and looking for its new names again,
:meth:`FeatureIndex.take_pending`, or takes the full path, which gives them columns); the next
learning call takes it (once) when its dict is equal to that copy. Equal means: a ``dict`` or
``Counter`` with the same keys and values as the copy (``dict.__eq__``: not ``Counter``'s, which
reads a missing key as 0), every key a ``str`` or ``int`` and every value a ``float``, ``int`` or
``None``, as the copy's were: then each key is the copy's (a ``str`` never equals an ``int``) and
each value the same real number (or ``None``), so the vector is the one mapping it again would give
(a zero of either sign reads as 0, as everywhere in the core's sparse route). A dict mutated
between the calls is unequal to the copy (mapped again); new inputs between the calls
(:meth:`FeatureIndex.add`) drop the memo; the memo belongs to its index, so a learner that adopts
or restores another index never sees it.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np

from streammkl.core.model import MAX_ABS_INPUT

_MEMO_DICTS = (dict, Counter)  # dicts whose items are their dict storage (dict.__eq__ reads it)
_KEY_TYPES = frozenset({str, int})
_VALUE_TYPES = frozenset({float, int, type(None)})
_NUMBERS = frozenset({float, int})


class FeatureIndex:
    """Name -> column map that only grows."""

    #: (A class default as well: an index pickled before the memo loads without one.)
    _memo: tuple[dict, Any] | None = None
    #: What :meth:`take_pending` hands over (set and taken within one learning call; an
    #: instance's own only in between: a learner pickles as it did without it).
    _pending: list[str] | None = None

    def __init__(self, names: list[str] | None = None):
        self.names: list[str] = list(names or [])
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self._ints: dict[int, int] = {}  # int name -> column (the column of its str)
        #: The last prediction's record (a copy) and its vector (see the module's docstring).
        self._memo: tuple[dict, Any] | None = None

    def __len__(self) -> int:
        return len(self.names)

    def new_names(self, x: Mapping) -> list[str]:
        """The names of ``x`` without a column (as ``str``), sorted; at C speed (a set's
        difference with the index) past the one conversion per key that is not a ``str``."""
        return sorted({k if type(k) is str else _key(k) for k in x}.difference(self.index))

    def names_keyed_like(self, x: Mapping) -> list[Any]:
        """The names in column order, each as a key of ``x``'s kind would spell it: the names
        themselves when ``x``'s first key is not an ``int``; else (river's synthetic streams name
        features 0, 1, ...) each name that is the ``str`` of an ``int`` as that ``int`` (the key
        every mapping here reads as that name), the others as they are. A compiled run reads
        its records' values by these keys (:meth:`Rounds.plan`): a record of ``int`` keys
        then takes the run its ``str``-keyed twin takes, with the same numbers."""
        first = next(iter(x), None)
        if type(first) is not int:
            return self.names
        return [_int_name(name) for name in self.names]

    def add(self, names: list[str]) -> None:
        self._memo = None
        for name in names:
            if name not in self.index:
                self.index[name] = len(self.names)
                self.names.append(name)

    def vector(self, x: Mapping, validated: bool = False) -> np.ndarray:
        """Dense vector over the known columns (unknown names are ignored: add them first).

        ``validated``: the values already passed ``check_numeric`` (skip the per-value checks).
        """
        out = np.zeros(len(self.names))
        index = self.index
        for key, value in x.items():
            col = index.get(key if type(key) is str else _key(key))
            if col is None or value is None:
                continue
            out[col] = value if validated else _number(key, value)
        return out

    def rows(self, xs: Sequence[Mapping]) -> np.ndarray:
        """``vector(x, validated=True)`` of every record, stacked (one row each). Records with
        the same ``str`` keys in the same order, every one with a column and no value None
        (a stream of fixed records), are laid out at once, column by column, instead of one
        dict walk per record: the same numbers."""
        n = len(self.names)
        if not xs:
            return np.zeros((0, n))
        first = tuple(xs[0])
        cols = [self.index.get(k) if type(k) is str else None for k in first]
        if None not in cols and all(tuple(x) == first for x in xs):
            values = [list(x.values()) for x in xs]
            if not any(None in row for row in values):
                out = np.zeros((len(xs), n))
                out[:, np.array(cols, dtype=np.int64)] = np.array(values, dtype=np.float64)
                return out
        return np.stack([self.vector(x, validated=True) for x in xs])

    @overload
    def known_vector(self, x: Mapping, learn: bool) -> np.ndarray | None: ...

    @overload
    def known_vector(
        self, x: Mapping, learn: bool, entries: Literal[True]
    ) -> tuple[np.ndarray, np.ndarray] | None: ...

    def known_vector(self, x: Mapping, learn: bool, entries: bool = False) -> Any:
        """``x`` as :meth:`vector` gives it, in one pass, when every value is a plain ``float`` or
        ``int`` within ``+-MAX_ABS_INPUT`` (or ``None``) under a ``str`` key; None when another
        case needs the full path (nothing changed). ``learn``: an unknown name also answers None
        (it would get a column); else it is ignored, as predictions ignore it. ``entries``: the
        record's entries instead of the vector (:meth:`known_sparse`; one loop validates and
        maps a record for both, and the dense call, the hot one, pays no call more).

        A prediction's vector is remembered with a copy of ``x``; the next learning call on an
        equal record gets that very vector (see the module's docstring), or None at once when
        the prediction met names without a column (for entries, those names then wait for
        :meth:`take_pending`): callers never write into the vector they get. A memo holds a
        vector or entries: a learning call takes only its own kind."""
        if self._pending is not None:  # (not taken: stale)
            del self._pending
        if learn:
            memo = self._memo
            if memo is not None:
                self._memo = None
                if _same_record(memo[0], x):
                    kept = memo[1]
                    if type(kept) is list:  # names without a column, met by the prediction
                        if entries:
                            self._pending = kept  # (for :meth:`take_pending`, at once)
                        return None
                    if type(kept) is not (np.ndarray if entries else tuple):
                        return kept  # (None: it has names without a column)
        if entries:
            found = _entries_of(x, self.index)
            if found is not None:
                if not learn:
                    self._memo = (dict(x), found) if type(x) in _MEMO_DICTS else None
                return found
        # Where a mapped value goes: the vector, or column -> value (a later value wins in both)
        out: Any = {} if entries else np.zeros(len(self.names))
        index = self.index
        missing: list[str] = []  # (the str names without a column, for a prediction)
        for key, value in x.items():
            kind = type(value)
            if kind is float or kind is int:
                if not -MAX_ABS_INPUT <= value <= MAX_ABS_INPUT:  # NaN, +-Inf, too large:
                    return None  # the full path names it
            elif value is not None:
                return None
            col = index.get(key)
            if col is None and type(key) is int:  # river's synthetic streams: int names
                col = self._int_column(key)
            if col is None:
                if learn or type(key) is not str:
                    return None
                missing.append(key)
            elif value is not None:
                out[col] = value
        if entries:
            n = len(out)
            out = np.fromiter(out, np.int64, n), np.fromiter(out.values(), np.float64, n)
        if not learn:
            if type(x) not in _MEMO_DICTS:
                self._memo = None
            elif not missing:
                self._memo = (dict(x), out)
            else:  # a learning call of entries admits these names (:meth:`take_pending`)
                self._memo = (dict(x), sorted(missing) if entries else None)  # (distinct)
        return out

    def known_sparse(self, x: Mapping, learn: bool) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`known_vector` as the record's entries, at a cost linear in ``x`` (no vector of
        the known width): ``(cols, vals)``, int64 columns (each once, in the order the dict
        first names it) and float64 values (a column's later value wins, as in the vector;
        zeros kept, the core skips them); None in the same cases."""
        return self.known_vector(x, learn, True)

    def take_pending(self) -> list[str] | None:
        """After a learning call of :meth:`known_sparse` that answered None because the
        prediction just before, on an equal record, met names without a column: those names
        (sorted, distinct, as :meth:`new_names` gives them), once; else None. The record's
        values passed the checks of ``check_numeric`` (those of the prediction's equal record:
        equal values of the same types). What the learning call's admission would find again
        (see :meth:`Rounds.learn_known`)."""
        pending = self._pending
        if pending is None:
            return None
        del self._pending
        return pending

    def _int_column(self, key: int) -> int | None:
        """The column of an ``int`` name (its ``str``'s), remembered once found."""
        col = self._ints.get(key)
        if col is None:
            col = self.index.get(str(key))
            if col is not None:
                self._ints[key] = col
        return col


def _entries_of(x: Mapping, index: dict[str, int]) -> tuple[np.ndarray, np.ndarray] | None:
    """The entries of ``x`` when every key has a column and every value is a plain ``float`` or
    ``int`` within ``+-MAX_ABS_INPUT``, at C speed (the columns by one ``map`` of the index's
    ``get``, the values checked as :func:`check_numeric` checks them); None otherwise (the
    loop of :meth:`FeatureIndex.known_vector` decides). The keys of a dict are distinct and
    so are their columns: the columns are each once, in the dict's order, as the loop gives
    them."""
    cols = list(map(index.get, x))
    if None in cols:
        return None
    values = list(x.values())
    if not _NUMBERS.issuperset(map(type, values)):
        return None
    if values:
        try:
            if not (
                math.isfinite(sum(values))
                and -MAX_ABS_INPUT <= min(values)
                and max(values) <= MAX_ABS_INPUT
            ):
                return None
        except OverflowError:  # an int beyond a float's range: the loop refuses it
            return None
    return np.array(cols, dtype=np.int64), np.array(values, dtype=np.float64)


def _same_record(kept: dict, x: Mapping) -> bool:
    """Whether ``x`` maps to the vector of ``kept`` (a remembered record; see the module's
    docstring): equal as dicts, with keys and values of the types ``kept``'s had."""
    return (
        type(x) in _MEMO_DICTS
        and dict.__eq__(kept, x) is True
        and _KEY_TYPES.issuperset(map(type, x))
        and _VALUE_TYPES.issuperset(map(type, x.values()))
    )


def _int_name(name: str) -> int | str:
    """``name`` as the ``int`` whose ``str`` it is (``_key`` of that ``int`` gives it back), or
    ``name`` itself when there is none ("01", "1_0", " 1" stay strings)."""
    try:
        key = int(name)
    except ValueError:
        return name
    return key if str(key) == name else name


def _key(key: object) -> str:
    return key if isinstance(key, str) else str(key)


def _number(key: object, value: object) -> float:
    kind = type(value)
    if kind is float or kind is int:  # the common case, without the ABC machinery
        v = float(value) if kind is float else _int_value(key, value)  # type: ignore[arg-type]
        if not -MAX_ABS_INPUT <= v <= MAX_ABS_INPUT:
            raise _out_of_range(key, value)
        return v
    if isinstance(value, bool | np.bool_):
        return float(value)
    if not isinstance(value, numbers.Real):
        raise TypeError(
            f"feature {key!r} has a non-numeric value {value!r} ({type(value).__name__}); "
            "encode it first (e.g. river.preprocessing.OneHotEncoder)"
        )
    v = float(value)
    if not -MAX_ABS_INPUT <= v <= MAX_ABS_INPUT:
        raise _out_of_range(key, value)
    return v


def _int_value(key: object, value: int) -> float:
    try:
        return float(value)
    except OverflowError:  # an int beyond float's range
        raise ValueError(f"feature {key!r} has a value beyond +-{MAX_ABS_INPUT:g}") from None


def _out_of_range(key: object, value: object) -> ValueError:
    """The error for a value a model refuses: NaN, +-Inf, or beyond ``+-MAX_ABS_INPUT``."""
    if math.isfinite(float(value)):  # type: ignore[arg-type]
        return ValueError(
            f"feature {key!r} has a value {value!r} beyond +-{MAX_ABS_INPUT:g} (the largest "
            "magnitude a streammkl model takes: rescale the feature)"
        )
    return ValueError(f"feature {key!r} has a non-finite value {value!r}")


def check_numeric(x: Mapping) -> None:
    """Validate every value of x before the model is touched (bad input changes nothing).

    A record of plain ``float`` and ``int`` values (a bag of words' counts, most records) is
    checked at C speed: a finite sum means no NaN or infinity among them (either makes the sum
    NaN or infinite; values within the bound cannot overflow it), then the smallest and the
    largest against the bound (Python compares an ``int`` with a float exactly). Anything
    else, or a record that fails, goes through the loop, which names the offending feature."""
    values = x.values()
    if x and _NUMBERS.issuperset(map(type, values)):
        try:
            if (
                math.isfinite(sum(values))
                and -MAX_ABS_INPUT <= min(values)
                and max(values) <= MAX_ABS_INPUT
            ):
                return
        except OverflowError:  # an int beyond a float's range: the loop's error
            pass
    for key, value in x.items():
        if value is not None:
            _number(key, value)
