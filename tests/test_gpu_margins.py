"""The GPU margins: each check's bound against the honest error read from the committed GPU studies."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_margins  # noqa: E402

LSD_H200 = ROOT / "benchmarks/gpu_runs/2026-11-27-h200/1-race-pytest-lsd-chmm/lsd/studies-lsd.db"


def test_the_h200_lsd_study_gives_bf16_its_worst_honest_error_and_counts_a_repeat_once():
    lines = {(line["metric"], line["bound"]): line for line in gpu_margins.margins(gpu_margins.checks(LSD_H200))}
    bf16 = lines[("latents", 0.007)]
    # Seven bf16 or amp_bf16 configs passed; trials #12 and #16 repeated #9 and #13 and are not counted again.
    assert bf16["precisions"] == ["amp_bf16", "bf16"] and bf16["passed"] == 7 and bf16["failed"] == 0
    assert bf16["worst_error"] == pytest.approx(3.951e-3, rel=1e-3) and bf16["worst_trial"] == 4
    assert bf16["worst_share"] == pytest.approx(0.564, abs=1e-3)
    assert lines[("latents", 2e-06)]["worst_error"] == 0.0  # fp32: the reference's own config and kernels


def test_a_failed_check_is_counted_with_its_share_of_the_bound(tmp_path):
    rows = [{"study": "s", "trial": n, "precision": "fp16", "metric": "m", "error": e, "bound": 1e-3,
             "passed": e is not None and e <= 1e-3} for n, e in enumerate([2e-4, 9e-4, 4e-3, None])]
    (line,) = gpu_margins.margins(rows)
    assert (line["passed"], line["failed"], line["worst_trial"]) == (2, 2, 1)
    assert line["worst_share"] == pytest.approx(0.9) and line["nearest_failure_share"] == pytest.approx(4.0)


def test_the_script_reads_every_committed_study_and_refuses_a_missing_file(capsys):
    assert gpu_margins.main(["--markdown"]) == 0
    printed = capsys.readouterr().out
    assert "| lsd-h200-small | latents | amp_bf16 bf16 | 0.007 | 7 | 0.00395 | 0.56 | 0 | - |" in printed
    with pytest.raises(SystemExit, match="no such database: nowhere.db"):
        gpu_margins.main(["nowhere.db"])
