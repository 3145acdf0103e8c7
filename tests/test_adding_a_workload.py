"""The README's whole example of a workload of one's own ("Adding a workload"), run as written there.

A user copies it first: a typo in it, or an API it uses that has moved, costs them their first hour.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import autotune
from tests.conftest import run_cli

WORKLOAD = "distances.py:DistancesWorkload"


def test_the_readmes_workload_searches_and_its_export_loads(readme_example: Path, monkeypatch) -> None:
    done = run_cli("search", "-w", WORKLOAD, "-d", "cpu", "-s", "tiny", "-n", "6", "--min-time", "0.05",
                   "--remeasure-rounds", "1", cwd=readme_example, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "all 6 allowed configs of the space are measured" in done.stderr, done.stderr[-3000:]
    exported = json.loads((readme_example / "studies" / "distances" / "cpu-tiny.json").read_text())
    assert exported["check"]["passed"] and exported["speedup"] > 1
    assert exported["config"]["method"] in {"loop", "cdist", "expand"}
    # As the README says a script beside the two files reads it: the workload named as --workload names it.
    monkeypatch.chdir(readme_example)
    monkeypatch.delenv("AUTOTUNE_STUDIES", raising=False)
    tuned = autotune.load_config(WORKLOAD, device="cpu", size="tiny")
    assert tuned.source != "defaults" and dict(tuned) == exported["config"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])  # every precision its space offers
def test_the_readmes_workload_check_fails_the_mistake_its_comment_names(readme_example: Path, dtype: str) -> None:
    # The comment says the bound sits far below the expansion without its 2; at tiny as at small, it must fail.
    source = (readme_example / "distances.py").read_text()
    assert source.count(" - 2 * a @ b.T") == 1
    (readme_example / "distances.py").write_text(source.replace(" - 2 * a @ b.T", " - a @ b.T"))
    done = run_cli("run", "-w", WORKLOAD, "-d", "cpu", "-s", "tiny", "--set", "method=expand", "--set",
                   f"dtype={dtype}", "--min-time", "0.05", "--json", cwd=readme_example, timeout=300)
    result = json.loads(done.stdout)
    assert result["status"] == "incorrect", result
    assert result["check"]["error"] > 100 * result["check"]["tolerance"], result["check"]
