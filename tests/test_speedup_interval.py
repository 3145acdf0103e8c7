"""benchmarks/speedup_interval.py: whether a search's interval holds the speedup searches find again."""

import importlib.util
from pathlib import Path

from autotune.measure import Measurement

ROOT = Path(__file__).resolve().parent.parent


def _module():
    spec = importlib.util.spec_from_file_location("speedup_interval", ROOT / "benchmarks" / "speedup_interval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_intervals_drawn_by_round_hold_a_mean_that_pooled_runs_miss():
    # Searches whose rounds' medians move a few percent, their runs within a round agreeing to 0.1%: the runs pooled
    # give intervals too narrow to hold the searches' mean speedup; drawn by round, they hold it.
    score = _module().score

    def pooled(medians):
        return Measurement.pooled([Measurement([m * (1 + 0.001 * (i % 3 - 1)) for i in range(30)], 1, 0.0)
                                   for m in medians])

    winner = pooled([0.5, 0.5, 0.5])
    pairs = [(pooled([1.0 + a, 1.0 + b, 1.0 + c]), winner)
             for a, b, c in [(0.03, -0.02, 0.0), (-0.03, 0.01, 0.02), (0.02, 0.03, -0.01), (-0.02, -0.03, 0.01)]]
    scores = score(pairs)
    assert scores["runs pooled"]["held"] < scores["rounds, then runs"]["held"] == 4 == scores["rounds, then runs"]["of"]
    assert scores["runs pooled"]["widest"] < scores["rounds, then runs"]["narrowest"]
    assert abs(scores["speedups"]["mean"] - 2.0) < 0.05
