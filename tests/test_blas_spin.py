"""benchmarks/blas_spin.py: a forked process's runs timed after its set-up and check, each way before and as now."""

from tests.conftest import load_benchmark


def test_it_times_each_way_and_says_each(capsys):
    module = load_benchmark("blas_spin")
    assert module.main(["--rounds", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("1 rounds each way:") and len(lines) == 1 + len(module.WAYS)
    assert [line.split(" median run")[0].strip() for line in lines[1:]] == list(module.WAYS)
