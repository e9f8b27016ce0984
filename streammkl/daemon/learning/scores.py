"""The prequential scores of each task, named as a person reads them.

The loop counts, for every labelled prediction, a hit count and a loss (``counters``:
``labelled_predictions``, ``correct_predictions``, ``online_loss``); what they mean depends on
the task (:meth:`streammkl.daemon.loop.prequential.Prequential._emit`):

- classification: hits are right classes, the loss is the log-loss of the probabilities;
- regression: no hits, the loss is the squared error (so the score is the RMSE);
- sequence: per label (character, token): hits are right labels, the loss the wrong ones;
- parsing: per word: hits are right heads (the UAS), the loss the wrong ones.

:func:`prequential_scores` turns the counts into the task's scores; the demo's summary, the
progress line, ``streammkl inspect`` and ``streammkl report`` use it, so a regression never
shows an "accuracy" and a sequence labeller's error rate is not called a log-loss.
"""

from __future__ import annotations

import math

#: The scores of each task, in the order they are shown: (name, higher is better).
SCORES: dict[str, tuple[tuple[str, bool], ...]] = {
    "classification": (("accuracy", True), ("log-loss", False)),
    "regression": (("RMSE", False), ("MSE", False)),
    "sequence": (("label accuracy", True), ("label error rate", False)),
    "parsing": (("UAS", True), ("head error rate", False)),
}


def prequential_scores(task: str, labelled: int, correct: int, loss: float) -> dict[str, float]:
    """The task's prequential scores from the loop's counts (empty before any label).

    Parameters
    ----------
    task
        ``learner.task``: ``"classification"``, ``"regression"``, ``"sequence"`` or
        ``"parsing"`` (another name is scored as a classification).
    labelled, correct, loss
        The counts: labelled predictions (labels, for sequences and parses), hits, summed loss.
    """
    if labelled <= 0:
        return {}
    if task == "regression":
        mse = loss / labelled
        return {"RMSE": math.sqrt(mse), "MSE": mse}
    if task == "sequence":
        return {"label accuracy": correct / labelled, "label error rate": loss / labelled}
    if task == "parsing":
        return {"UAS": correct / labelled, "head error rate": loss / labelled}
    return {"accuracy": correct / labelled, "log-loss": loss / labelled}


def headline(task: str, labelled: int, correct: int, loss: float) -> str:
    """The task's first score as ``"accuracy 0.954"`` (``"RMSE 0.412"``); ``"-"`` before any."""
    scores = prequential_scores(task, labelled, correct, loss)
    if not scores:
        return "-"
    name, value = next(iter(scores.items()))
    return f"{name} {value:.4g}" if task == "regression" else f"{name} {value:.3f}"


__all__ = ["SCORES", "headline", "prequential_scores"]
