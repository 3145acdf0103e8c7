"""benchmarks/search_quality.py's reference, plain TPE: what counts as one of its evaluations."""

import importlib.util
import sys
from pathlib import Path

from autotune.recorded import load_recorded
from tests.test_simulate import _cache

ROOT = Path(__file__).resolve().parent.parent


def _module():
    spec = importlib.util.spec_from_file_location("search_quality", ROOT / "benchmarks" / "search_quality.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["search_quality"] = module
    spec.loader.exec_module(module)
    return module


def test_plain_tpe_counts_a_repeated_config_and_the_unique_variant_does_not(tmp_path):
    quality = _module()
    recorded = load_recorded(_cache(tmp_path))  # 10 configs, one of them failed
    counted = quality.plain_tpe(recorded, 30, seed=0)
    unique = quality.plain_tpe(recorded, 30, seed=0, count_repeats=False)
    # Thirty evaluations of a ten-config space repeat some; counting only new configs, there are ten at most.
    assert counted.evaluations == 30 and unique.evaluations == 10
    assert unique.best_so_far[-1] == recorded.optimum and len(unique.seconds_so_far) == 10
    assert quality.UNIQUE in quality.STRATEGIES
