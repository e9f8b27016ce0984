"""Two experts' trust from their past log-losses: :class:`FixedShareHedge`.

Exponentiated weights (Vovk's aggregating rule at rate ``eta`` on the log-loss) with a fixed
share (Herbster and Warmuth 1998): after each round every expert gets back ``share / 2`` of the
weight, so that a switch of the better expert after drift takes ~1 / share rounds instead of
the whole past. With two experts the state is one number, the weight on the second expert;
plain Python floats (one ``math.exp`` a round), no arrays.
"""

from __future__ import annotations

import math

#: A probability below this counts as this in the log-loss (a loss of at most 9.2 nats).
LOSS_FLOOR = 1e-4


def log_loss(p: float) -> float:
    """``-log max(p, LOSS_FLOOR)``."""
    return -math.log(max(p, LOSS_FLOOR))


class FixedShareHedge:
    """The fixed-share Hedge of two experts (a first and a second).

    Parameters
    ----------
    eta
        The rate: the weights are ``exp(-eta x summed losses)`` normalised (before the share).
    share
        In [0, 1): the weight mixed back uniformly after each update.
    """

    def __init__(self, eta: float = 0.25, share: float = 0.002, weight: float = 0.5):
        self.eta = eta
        self.share = share
        #: The weight on the second expert (the first's is ``1 - weight``).
        self.weight = weight

    def update(self, first_loss: float, second_loss: float) -> None:
        """One round: the two experts' losses; ``w2 <- w2 e^(-eta l2) / (w1 e^(-eta l1) + w2
        e^(-eta l2))``, then ``w <- (1 - share) w + share / 2``."""
        w = self.weight
        d = self.eta * (second_loss - first_loss)  # (no exp of a positive number: no overflow)
        if d > 0:
            e = w * math.exp(-d)
            w = e / (e + (1.0 - w))
        else:
            w = w / (w + (1.0 - w) * math.exp(d))
        self.weight = (1.0 - self.share) * w + 0.5 * self.share
