"""benchmarks/blas_spin.py: a forked process's runs timed just after its set-up and check, as before and as now."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_it_times_each_way_and_says_each(capsys):
    spec = importlib.util.spec_from_file_location("blas_spin", ROOT / "benchmarks" / "blas_spin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--rounds", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("1 rounds each way:") and len(lines) == 5
    assert [line.split(" median run")[0].strip() for line in lines[1:]] == list(module.WAYS)
