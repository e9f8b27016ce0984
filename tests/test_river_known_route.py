"""The one-call round of a record of known inputs (``OnlineMKL.learn_bound`` /
``predict_bound`` behind ``Rounds.learn_known`` / ``predict_known``): the same numbers bit for
bit as the general path on real river streams, taken when it should be, and a record it refuses
changes nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from river import datasets
from river.datasets import synth

from streammkl.core import OnlineMKL
from streammkl.core import _numba as nb
from streammkl.core._numba.record import RECORD, _check_model
from streammkl.river import MKLClassifier, MKLRegressor


def _general(x: dict) -> dict:
    """The same record with numpy float values: the learner's general path (never the
    one-call route, which takes plain ``float`` and ``int`` values only)."""
    return {k: v if v is None else np.float64(v) for k, v in x.items()}


STREAMS = {
    "Bananas": lambda: list(datasets.Bananas())[:1500],
    "Phishing": lambda: list(datasets.Phishing()),
    "Friedman": lambda: list(synth.Friedman(seed=42).take(1500)),
}


@pytest.mark.parametrize("standardize", [True, False])
@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_one_call_rounds_equal_the_general_path_bit_for_bit(stream, standardize, one_call_rounds):
    data = STREAMS[stream]()
    make = MKLRegressor if stream == "Friedman" else MKLClassifier
    fused, two_calls, general = (make(standardize=standardize) for _ in range(3))
    predict = "predict_one" if make is MKLRegressor else "predict_proba_one"
    for x, y in data:
        got = fused.learn_predict_one(x, y)
        before = getattr(two_calls, predict)(x)
        two_calls.learn_one(x, y)
        want = general.learn_predict_one(_general(x), y)
        assert got == want == before  # floats compared exactly
    digest = general.rounds().digest()
    assert fused.rounds().digest() == digest == two_calls.rounds().digest()
    np.testing.assert_array_equal(fused.rounds().last_input, general.rounds().last_input)
    n = len(data)
    assert one_call_rounds["learn"] > 2 * (n - 1100)  # past the bandwidth warm-up, every round
    assert one_call_rounds["predict"] > n - 1100


def test_a_refused_record_changes_nothing_and_raises_as_before():
    data = list(datasets.Phishing())[:300]
    model = MKLClassifier(standardize=True)
    for x, y in data:
        model.learn_predict_one(x, y)
    digest = model.rounds().digest()
    x, y = data[0]
    for bad in (math.nan, math.inf, 1e101, -1e300):
        with pytest.raises(ValueError, match="empty_server_form_handler"):
            model.learn_one({**x, "empty_server_form_handler": bad}, y)
        with pytest.raises(ValueError, match="empty_server_form_handler"):
            model.predict_proba_one({**x, "empty_server_form_handler": bad})
        assert model.rounds().digest() == digest
    with pytest.raises(ValueError):  # an input out of range under a name the model ignores
        model.predict_proba_one({**x, "unknown": math.nan})


def test_a_regressor_counts_the_target_once_when_the_record_is_refused():
    data = list(synth.Friedman(seed=1).take(200))
    model = MKLRegressor(standardize=True)
    for x, y in data:
        model.learn_one(x, y)
    digest = model.rounds().digest()
    x, y = data[0]
    for bad in (math.nan, 1e101):
        with pytest.raises(ValueError):
            model.learn_one({**x, 3: bad}, y)
        assert model.rounds().digest() == digest
    twin = MKLRegressor.from_state(*model.to_state())
    assert model.learn_predict_one(x, y) == twin.learn_predict_one(_general(x), y)
    assert model.rounds().digest() == twin.rounds().digest()


def test_keys_in_another_order_missing_new_and_unusual_values_agree(one_call_rounds):
    """Records whose keys change order, miss some, bring new ones (int and str names), or hold
    ``None``, ``bool`` and ``int`` values: the same numbers as the general path."""
    rng = np.random.default_rng(3)
    fused, general = MKLClassifier(standardize=True), MKLClassifier(standardize=True)
    for i in range(1400):
        x: dict = {"a": float(rng.normal()), 7: float(rng.normal()), "c": int(rng.integers(5))}
        if i % 5 == 1:
            x = dict(reversed(list(x.items())))
        if i % 7 == 2:
            del x["a"]
        if i % 11 == 3:
            x["c"] = None
        if i % 13 == 4:
            x["flag"] = bool(i % 2)
        if i >= 1200:
            x[f"late{i % 3}"] = float(rng.normal())
        y = ("p", "q", "r")[int((x.get("a") or 0.0) > 0) + (i >= 1300)]
        assert fused.predict_proba_one(x) == general.predict_proba_one(_general(x))
        assert fused.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    assert fused.rounds().digest() == general.rounds().digest()
    assert one_call_rounds["learn"] > 0 and one_call_rounds["predict"] > 0


def test_landmark_refreshes_happen_on_the_one_call_route_too(one_call_rounds):
    """A bank whose landmarks refresh (``LandmarkRBF(refresh=...)``, the accurate preset's):
    the one-call round refreshes them after the same rounds as the general path, so both
    learners end with the same landmarks and the same state, bit for bit."""
    from streammkl.core.kernels import LandmarkRBF
    from streammkl.river import defaults

    data = list(synth.RandomRBFDrift(seed_model=7, seed_sample=7, n_classes=2,
                                     n_features=4).take(2000))  # fmt: skip
    bank = defaults.accurate_bank()
    assert any(isinstance(k, LandmarkRBF) and k.refresh for k in bank)
    fused, general = MKLClassifier(kernels=bank), MKLClassifier(kernels=bank)
    for x, y in data:
        assert fused.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    assert one_call_rounds["learn"] > 500  # the one-call route took the rounds past the warm-up
    names = [k.name for k in fused.rounds().model.kernels]
    moved = [
        k for k, k0 in zip(fused.rounds().model.kernels, bank, strict=True)
        if isinstance(k, LandmarkRBF) and k.landmarks and k0.refresh
    ]  # fmt: skip
    assert moved and names == [k.name for k in general.rounds().model.kernels]
    assert fused.rounds().digest() == general.rounds().digest()


def test_the_regressor_round_gives_the_general_round_numbers_bit_for_bit():
    """The default regressor's rounds (an explicit bank under InvSqrt: ``learn_predict_md``,
    compiled without reference counting) against the general compiled round of the same
    model (``learn_many``'s ``learn_round``): the same predictions and state, bit for bit."""
    data = list(synth.Friedman(seed=7).take(600))
    X = np.array([list(x.values()) for x, _ in data])
    Y = np.array([y for _, y in data])
    Y = (Y - Y.mean()) / Y.std()
    one, many = MKLRegressor()._make_model(), MKLRegressor()._make_model()
    preds = np.array([one.learn_predict(x, y)[0] for x, y in zip(X, Y, strict=True)])
    assert one._args is not None and one._args.md  # the route under test
    _, many_preds = many.learn_many(X, Y)
    np.testing.assert_array_equal(preds, many_preds[:, 0])
    for key, arr in one.to_state()[1].items():
        np.testing.assert_array_equal(arr, many.to_state()[1][key], err_msg=key)


def test_the_one_call_route_follows_buffers_replaced_between_records(one_call_rounds):
    """The one-call route binds its buffers once (``OnlineMKL.bind_record``, a record pack):
    a record whose buffers (values, columns, raw and standardised vectors, the four
    statistics) are replaced by new arrays of the same contents, the replacement reported
    (``Rounds.buffers_replaced``, as their owners do), is learned and predicted on those, the
    numbers of a learner that keeps its buffers, bit for bit
    (tests/test_river_record_binding.py: each way an owner replaces one)."""
    data = list(datasets.Bananas())[:1300]
    kept, swapped = MKLClassifier(standardize=True), MKLClassifier(standardize=True)
    for i, (x, y) in enumerate(data):
        if i > 1100 and i % 7 == 0:  # every buffer replaced by a copy (the old ones dropped)
            rounds = swapped.rounds()
            known, scaler = rounds._known, rounds.scaler
            known._bind(known.vals.copy())
            known.cols, known.raw, known.xs = known.cols.copy(), known.raw.copy(), known.xs.copy()
            scaler.count, scaler.mean = scaler.count.copy(), scaler.mean.copy()
            scaler.m2, scaler.binary = scaler.m2.copy(), scaler.binary.copy()
            rounds.buffers_replaced()
        assert swapped.predict_proba_one(x) == kept.predict_proba_one(x)
        assert swapped.learn_predict_one(x, y) == kept.learn_predict_one(x, y)
        if i > 1100 and i % 7 == 0:
            np.testing.assert_array_equal(swapped.rounds()._known.xs, kept.rounds()._known.xs)
    assert swapped.rounds().digest() == kept.rounds().digest()
    np.testing.assert_array_equal(swapped.rounds().scaler.mean, kept.rounds().scaler.mean)
    assert one_call_rounds["learn"] > 2 * 190


def test_a_record_pack_is_called_by_its_address_without_changing_its_references():
    """The one-call route calls a record pack by the address of its meminfo (compiled both
    ways on numba's structref data model, ``core._numba.record``): the address gives the
    record's own numbers, and a thousand calls by it leave the record's reference count as it
    was (a missing incref would free it under the caller, a missing decref leak it)."""
    data = list(datasets.Bananas())[:400]
    model = MKLClassifier(standardize=True)
    for x, y in data[:300]:
        model.learn_predict_one(x, y)
    rounds = model.rounds()
    core, known = rounds.model, rounds._known
    known.values(data[300][0], rounds.features, True)
    rounds._bind_record(core)
    bound = core._bind_record()
    assert bound is not None
    address, record = bound[0], bound[3]
    assert isinstance(address, int) and address == nb.record_address(record) != 0
    refs = record._meminfo.refcount
    by_record = nb.predict_record(record)
    scores = core._args.fx.copy()
    for _ in range(1000):
        assert nb.predict_record_at(address) == by_record
    np.testing.assert_array_equal(core._args.fx, scores)
    assert record._meminfo.refcount == refs
    twin = MKLClassifier(standardize=True)
    for x, y in data[:300]:
        twin.learn_predict_one(x, y)
    for x, y in data[300:]:  # rounds through the address, against rounds through the record
        assert model.learn_predict_one(x, y) == twin.learn_predict_one(x, y)
    assert record._meminfo.refcount == refs
    assert core.digest() == twin.rounds().model.digest()


def test_the_record_address_needs_numbas_structref_model_of_one_meminfo():
    """What the record pack's address relies on in numba, checked: its data model is numba's
    structref model, one member ``meminfo`` (a meminfo pointer); on another model the address
    refuses to compile (a TypeError) instead of reading the wrong word."""
    from numba import types
    from numba.core.datamodel import default_manager

    model = default_manager.lookup(RECORD)
    assert type(model).__name__ == "StructRefModel"
    assert len(model.inner_models()) == 1
    assert isinstance(model.get_member_fe_type("meminfo"), types.MemInfoPointer)
    _check_model(RECORD)  # (the model the compiled address reads)
    for other in (types.float64[::1], types.UniTuple(types.int64, 2)):
        with pytest.raises(TypeError, match="structref data model changed"):
            _check_model(other)


def _continued(model, data):
    """Every prediction and one-call round of ``model`` over ``data`` (predict, then
    learn_predict_one), and its digest at the end."""
    out = []
    for x, y in data:
        out.append(model.predict_proba_one(x))
        out.append(model.learn_predict_one(x, y))
    return out, model.rounds().model.digest()


def test_every_way_a_learner_is_made_takes_the_one_call_route_with_the_same_numbers(
    one_call_rounds,
):
    """A learner copied (pickle, deepcopy, copy of its model), restored from a pickle made
    before the route existed (no ``_bound``, ``_values``, ``_values_args``: an ``OnlineMKL``
    made by ``__new__`` and ``__setstate__``), rebuilt by a new input, or used from another
    thread binds its record pack again and gives the numbers of the learner it came from. The
    one-off ``AttributeError: 'OnlineMKL' object has no attribute '_bound'`` seen once was a
    script of this branch run against the base checkout's ``streammkl`` (it reads ``_bound``,
    which the base has not): no way of making a learner here lacks it."""
    import copy
    import pickle
    import threading

    data = list(datasets.Bananas())[:700]
    first = MKLClassifier(standardize=True)
    for x, y in data[:400]:
        first.learn_predict_one(x, y)
    copies = [pickle.loads(pickle.dumps(first)), copy.deepcopy(first)]
    state = first.rounds().model.__getstate__()
    for key in ("_bound", "_values", "_values_args"):
        del state[key]
    old = copy.deepcopy(first)
    old.rounds().model.__dict__.clear()  # (the model as an old pickle restores it)
    OnlineMKL.__setstate__(old.rounds().model, copy.deepcopy(state))
    copies.append(old)
    threaded, wider = copy.deepcopy(first), pickle.loads(pickle.dumps(first))
    taken = one_call_rounds["learn"]
    expected = _continued(first, data[400:])
    assert one_call_rounds["learn"] - taken == 300
    for other in copies:
        taken = one_call_rounds["learn"]
        assert _continued(other, data[400:]) == expected
        assert one_call_rounds["learn"] - taken == 300
    result: list = []
    worker = threading.Thread(target=lambda: result.append(_continued(threaded, data[400:])))
    worker.start()
    worker.join()
    assert result == [expected]
    x, y = data[400]  # a new input: the model grows and binds its record pack again
    wider.learn_predict_one({**x, "extra": 0.5}, y)
    bound = wider.rounds().model._bound
    assert wider.learn_predict_one(*data[401]) is not None
    assert wider.rounds().model._bound is not bound
    assert wider.rounds().model._record[2].shape[0] == len(x) + 1
