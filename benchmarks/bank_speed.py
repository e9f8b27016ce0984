"""What a bank costs per call: the default bank against its variants, in one process.

``MKLClassifier(standardize=True, kernels=bank).learn_predict_one`` on the dense rows of
``benchmarks/river_speed.py`` (Bananas, Phishing, Hyperplane with 10 inputs and 10,000 examples;
the same warm-up of 1,100 examples before the timed ones), CPU time per example
(``time.process_time``), the banks interleaved run by run so that they share the machine's
load; medians of ``--reps`` runs, and each bank's ratio to the default's and to the accurate
bank's (``defaults.accurate_bank()``) time. Banks: the default, the default with its landmarks
refreshed (``LandmarkRBF(16, 50, refresh=100)``), the default plus ``RandomBinning(64, 4, 4)``,
the accurate bank without its random binning (stumps and the narrow Gaussian), the accurate
bank with fixed landmarks (``refresh=0``) and the accurate bank (its landmarks refreshed).

Run: ``python benchmarks/bank_speed.py [--reps 7]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

REFRESH = 100  # the landmark refresh period measured beside the default bank


def _banks() -> dict[str, tuple]:
    from streammkl.core import kernels
    from streammkl.river import defaults

    def landmarks(bank: tuple, refresh: int) -> tuple:
        return tuple(
            kernels.LandmarkRBF(k.scale, k.n_landmarks, k.features, refresh=refresh)
            if isinstance(k, kernels.LandmarkRBF)
            else k
            for k in bank
        )

    accurate = defaults.accurate_bank()
    binning = [k for k in accurate if isinstance(k, kernels.RandomBinning)]
    return {
        "default": defaults.kernel_bank(),
        f"default, landmarks refreshed ({REFRESH})": landmarks(defaults.kernel_bank(), REFRESH),
        "default + binning": (*defaults.kernel_bank(), *binning),
        "accurate without binning": tuple(k for k in accurate if k not in binning),
        "accurate, fixed landmarks": landmarks(accurate, 0),
        "accurate": accurate,
    }


def main(argv: list[str] | None = None) -> None:
    import river_speed as rsp

    from streammkl.river import MKLClassifier

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7, help="runs per bank (medians)")
    add_out(parser)
    args = parser.parse_args(argv)
    header = machine()
    banks = _banks()

    def make(bank: tuple) -> Callable[[], Any]:
        return lambda: MKLClassifier(standardize=True, kernels=bank)

    runs = {b: (make(bank), rsp.one_call) for b, bank in banks.items()}
    rows: list[list[Any]] = []
    for name, meds in rsp.interleaved_per_call(runs, args.reps).items():
        default, accurate = meds["default"], meds["accurate"]
        rows += [[name, b, f"{med:.2f}", f"{med / default:.3f}", f"{med / accurate:.3f}"]
                 for b, med in meds.items()]  # fmt: skip
    body = "\n\n".join([
        f"{header}; medians of {args.reps} runs per bank, the banks interleaved.",
        markdown(["stream", "bank", "µs per call (CPU)", "/ default", "/ accurate"], rows),
    ])  # fmt: skip
    print(body)
    full = documented_run(parser, args)
    publish("bank_speed", "What a bank costs per call", body, full, args.out)


if __name__ == "__main__":
    main()
