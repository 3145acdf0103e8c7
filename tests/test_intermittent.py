"""benchmarks/intermittent.py: a config wrong one run in K, caught with and without the checks after the timing."""

from tests.conftest import load_benchmark


def test_a_config_wrong_at_every_run_is_caught_by_both_settings(capsys, tmp_path, monkeypatch):
    # One run in 1 is every run: the first output is wrong, whatever the draw.
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its folder made here, and gone at the end
    assert load_benchmark("intermittent").main(["--every", "1", "--trials", "1"]) == 0
    assert list(tmp_path.iterdir()) == []  # each run left 300 KB in /tmp
    out = capsys.readouterr().out
    assert "its counts doubled in one run in 1; 1 trials each" in out
    rows = [line for line in out.splitlines() if " of 1 " in line]
    assert len(rows) == 6 and all("  1 of 1 " in row for row in rows), out
