"""Learning guarded against poison records: growth admitted or refused, risky steps marked.

:class:`GuardedLearning` is mixed into the prequential step
(:mod:`streammkl.daemon.loop.prequential`): it learns the part of a batch that cannot go through one
compiled run. Records that bring nothing new are learned in stretches (the learner's own
``learn_predict_many``, with its compiled runs); a record that makes the model grow -- new features,
a new class -- is checked by the admission (:mod:`streammkl.daemon.learning.admission`: refused
records become dead letters) and learned alone, marked in flight
(:mod:`streammkl.daemon.checkpoints.inflight`), so that if it kills the process the restart knows
which record it was. After a crash, the records the marker asks for (a suspect; the span of a
process that died outside a marked step) are learned alone too.
"""

from __future__ import annotations

from typing import Any

from streammkl.daemon.learning.admission import Refusal


class GuardedLearning:
    """The guarded part of the step (attributes are the runner's)."""

    learner_step: Any
    #: What the learner admits (:class:`~streammkl.daemon.learning.admission.Admission`) and the
    #: in-flight marker (:class:`~streammkl.daemon.checkpoints.inflight.InflightMarker`).
    admission: Any
    marker: Any

    def _any_alone(self, valid: list[tuple[Any, Any]]) -> bool:
        alone = self.marker.alone
        return any(alone(m.topic, m.partition, m.offset) for m, _ in valid)

    def _alone(self, msg: Any, x: Any, y: Any) -> bool:
        """Whether a record is learned alone, marked in flight: it makes the model grow (its
        admission is checked then), or a crash asks for it (a suspect, a careful replay)."""
        marker = self.marker
        if marker.watching and marker.alone(msg.topic, msg.partition, msg.offset):
            return True
        return self.admission.grows(x, y)

    def _learn_tail(
        self,
        valid: list[tuple[Any, Any]],
        xs: list[Any],
        ys: list[Any],
        start: int,
        refused: dict[int, Exception | Refusal],
    ) -> list[Any]:
        """The outcomes of ``xs[start:]`` (:data:`streammkl.daemon.learning.drivers.Outcome`),
        learned in order: the records that bring nothing new through the step's
        ``learn_predict_many`` in stretches (its compiled runs, if any), each other record alone
        (:meth:`_learn_alone`); refusals and learner errors into ``refused`` (errors are data)."""
        step = self.learner_step
        out: list[Any] = []
        n = len(xs)
        i = start
        while i < n:
            j = i
            while j < n and not self._alone(valid[j][0], xs[j], ys[j]):
                j += 1
            if j > i:

                def note(k: int, exc: Exception, base: int = i) -> None:
                    refused[base + k] = exc

                out += step.learn_predict_many(xs[i:j], ys[i:j], note)
            if j < n:
                out.append(self._learn_alone(valid[j][0], xs[j], ys[j], j, refused))
            i = j + 1
        return out

    def _learn_alone(
        self, msg: Any, x: Any, y: Any, i: int, refused: dict[int, Exception | Refusal]
    ) -> Any:
        """One record that makes the model grow (or that a crash asks for): admitted or
        refused, then learned marked in flight; its outcome (``None``: refused)."""
        refusal = self.admission.admit(x, y)
        if refusal is not None:
            refused[i] = refusal
            return None

        def note(k: int, exc: Exception) -> None:
            refused[i] = exc

        self.marker.begin(msg.topic, msg.partition, msg.offset)
        outcome = self.learner_step.learn_predict_many([x], [y], note)[0]
        self.marker.end()  # (not on an exception out of the loop: that is a crash too)
        return outcome
