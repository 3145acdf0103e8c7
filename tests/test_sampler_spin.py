"""benchmarks/sampler_spin.py: a trial timed just after the sampler's solve, with and without the search's limit."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_it_times_both_ways_and_says_each(capsys):
    spec = importlib.util.spec_from_file_location("sampler_spin", ROOT / "benchmarks" / "sampler_spin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--rounds", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("1 rounds each way:") and len(lines) == 3
    assert lines[1].lstrip().startswith("numpy's threads") and lines[2].lstrip().startswith("one BLAS thread")
