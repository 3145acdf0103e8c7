"""benchmarks/search_quality.py's reference, plain TPE: what counts as one of its evaluations."""

from autotune.recorded import load_recorded
from tests.conftest import load_benchmark
from tests.test_simulate import _cache


def test_plain_tpe_counts_a_repeated_config_and_the_unique_variant_does_not(tmp_path):
    quality = load_benchmark("search_quality")
    recorded = load_recorded(_cache(tmp_path))  # 10 configs, one of them failed
    counted = quality.plain_tpe(recorded, 30, seed=0)
    unique = quality.plain_tpe(recorded, 30, seed=0, count_repeats=False)
    # Thirty evaluations of a ten-config space repeat some; counting only new configs, there are ten at most.
    assert counted.evaluations == 30 and unique.evaluations == 10
    assert unique.best_so_far[-1] == recorded.optimum and len(unique.seconds_so_far) == 10
    assert quality.UNIQUE in quality.STRATEGIES
