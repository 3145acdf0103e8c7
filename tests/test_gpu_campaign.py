"""The GPU campaign, dry-run on the CPU at `tiny`: every file it promises lands under --out, and nothing else."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # 18 s of the default run; run it with -m slow before a campaign
def test_the_campaign_dry_runs_on_the_cpu(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_campaign.py"), "--device", "cpu", "--size", "tiny",
         "--workloads", "chmm", "--timeout", "3", "--trials", "3", "--min-time", "0.05", "--out", str(out),
         "--work", str(work), "--explain", "--explain-rounds", "1"],
        capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    # At most 8 files come back from the device machine, two folders down.
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "explain-chmm.json", "log-chmm.txt", "presets/chmm/cpu-tiny.json", "studies-chmm.db", "summary-chmm.json",
        "summary-chmm.md"]
    # --explain: the winner's fixes, each alone and inside the winner, against the guide's claims.
    explained = json.loads((out / "explain-chmm.json").read_text())
    assert explained["fixes"] and all(f["verdict"] for f in explained["fixes"])
    assert "### chmm: what each fix bought" in (out / "summary-chmm.md").read_text()
    assert "trial #0   baseline ok" in (out / "log-chmm.txt").read_text()  # the search's progress, for reading back
    summary = json.loads((out / "summary-chmm.json").read_text())
    row = summary["rows"][0]
    assert row["workload"] == "chmm" and row["error"] is None and row["speedup"] > 0
    assert row["baseline"] > 0 and row["tuned"] > 0 and row["environment"]["torch"]
    preset = json.loads((out / "presets" / "chmm" / "cpu-tiny.json").read_text())
    assert preset["config"] == row["config"]
    assert "| chmm | tiny |" in (out / "summary-chmm.md").read_text()


def test_a_part_with_no_time_left_skips_its_workload_and_says_so(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_campaign.py"), "--device", "cpu", "--size", "tiny",
         "--workloads", "chmm", "--timeout", "3", "--deadline", "30", "--out", str(tmp_path),
         "--work", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    row = json.loads((tmp_path / "summary-chmm.json").read_text())["rows"][0]
    assert row["error"].startswith("skipped:") and row["size"] == "tiny" and row["verdict"] == "no result"


def test_sizes_and_timeouts_are_given_for_all_workloads_or_for_one():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_campaign import per_workload

    assert per_workload(["full", "chmm=small"], "chmm", str) == "small"
    assert per_workload(["full", "chmm=small"], "lsd", str) == "full"
    assert per_workload(["200", "ten=60"], "ten", float) == 60.0
    with pytest.raises(SystemExit, match="no value for lsd"):
        per_workload(["chmm=small"], "lsd", str)


def test_a_search_that_exports_nothing_is_a_row_that_says_why(tmp_path, monkeypatch):
    # `search` exits 1 with its JSON when no config passed or fit: the row keeps the counts, not a log's tail.
    import argparse

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_campaign

    printed = json.dumps({"counts": {"incorrect": 7, "crash": 2}, "winner": None})
    monkeypatch.setattr(gpu_campaign, "run_child",
                        lambda command, *a, **k: subprocess.CompletedProcess(command, 1, stdout=printed))
    args = argparse.Namespace(device="cpu", trials=3, min_time=0.05, trial_timeout=10.0, remeasure_top=1,
                              remeasure_rounds=1)
    result = gpu_campaign.search("chmm", "tiny", 3.0, args, tmp_path, tmp_path / "log.txt", seconds_left=300.0)
    assert result["error"] == "nothing exported; trials: incorrect 7, crash 2"
    assert gpu_campaign.summarise("chmm", result, tmp_path)["verdict"] == "no result"


def test_the_explanation_is_a_table_under_the_summary_or_says_why_it_is_missing(tmp_path):
    import argparse

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_campaign
    from tests.test_report import explanation

    row = {"workload": "lsd", "size": "full", "unit": "frames", "baseline": 8.5, "tuned": 165.5, "speedup": 19.4,
           "peak_memory_bytes": 2**30, "claim": gpu_campaign.CLAIMS["lsd"], "verdict": "above claim",
           "explain": {"file": "explain-lsd.json", "document": explanation()}}
    text = gpu_campaign.markdown([row])
    assert "### lsd: what each fix bought" in text and "fix 1: 2-3x" in text and "in the winner" in text
    row["explain"] = {"error": "skipped: 20 s left in the part"}
    assert "explain: skipped: 20 s left in the part" in gpu_campaign.markdown([row])
    # With too little of the part left, nothing is started.
    args = argparse.Namespace(explain_rounds=1, min_time=0.05, trial_timeout=10.0)
    result = {"device": "cpu", "size": "tiny"}
    assert gpu_campaign.explain("chmm", result, args, tmp_path, tmp_path, tmp_path / "log.txt", 35.0) == {
        "error": "skipped: 35 s left in the part"}
    # One that fails says why in one line (a winner that is the baseline has no fix to explain).
    def fails(command, work, log, title, limit, stdout=None):  # as the child does: its error ends the log
        with log.open("a") as stream:
            stream.write("autotune: error: the target config is the baseline: there is no fix to explain\n")
        return subprocess.CompletedProcess(command, 2)

    with mock.patch.object(gpu_campaign, "run_child", fails):
        said = gpu_campaign.explain("chmm", result, args, tmp_path, tmp_path, tmp_path / "log.txt", 300.0)
    assert said == {"error": "exit 2: autotune: error: the target config is the baseline: there is no fix to explain"}


def test_a_claim_verdict_compares_the_measured_speedup_with_the_claimed_range():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_campaign import verdict

    assert verdict(1.9, [1.96, 1.96]) == "confirmed"
    assert verdict(1.2, [1.96, 1.96]) == "below claim"
    assert verdict(80.0, [10.0, 50.0]) == "above claim"
    assert verdict(0.8, None) == "not faster" and verdict(None, [2, 3]) == "no result"


def test_probe_times_baseline_and_defaults(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_probe.py"), "--device", "cpu", "--runs", "chmm:tiny",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # its cache folder, in tmp_path rather than the machine's /tmp
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "probe.json").read_text())
    for role in ("baseline", "defaults"):
        entry = figures[f"chmm:tiny:{role}"]
        assert "error" not in entry, entry
        assert entry["cold_s"] > 0 and entry["warm_s"] > 0


@pytest.mark.slow  # 11 s: a benchmark's README lines, run with -m slow to keep the default run under 10 minutes
def test_the_readmes_em_timing_lines_run_on_the_cpu_at_tiny(tmp_path):
    # The campaign's chmm part ends with EM timings at `full` on the GPU. The README's loop, run as written but on
    # the CPU at tiny: a typo there costs a part of a lease that comes seldom.
    readme = (ROOT / "README.md").read_text()
    start = readme.index('for c in "chained 512"')
    loop = readme[start:readme.index("done", start) + len("done")].replace("\\\n", " ")
    assert "--device cuda" in loop and "--sizes full" in loop and "--skip-numba" in loop
    loop = (loop.replace("--device cuda", "--device cpu").replace("--sizes full", "--sizes tiny")
            .replace("--rounds 3", "--rounds 1").replace("python3 ", f"{sys.executable} "))
    done = subprocess.run(["bash", "-c", loop], cwd=ROOT, env={**os.environ, "OUT": str(tmp_path)},
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    text = (tmp_path / "machine-and-chmm-em.txt").read_text()
    configs = re.findall(r"^tuned config: .*?chunk_size=(\d+) .*?messages=(\w+) .*?update_c=(\w+)", text, re.M)
    assert configs == [("512", "chained", "batched"), ("256", "chained", "batched"), ("2048", "scan", "batched")], text
    rows = [line.split() for line in text.splitlines() if line.startswith("tiny ")]
    assert len(rows) == 3 and all(row[1] == "tuned" and row[4] == "-" and float(row[5]) < 0 for row in rows), text


def test_a_killed_search_still_reports_its_trial_figures_not_re_measured(tmp_path):
    # On the H100 (2026-11-25) the part's deadline killed vlm_mc's search while it re-measured: the row said only
    # "killed after 264 s", though its study held a baseline trial (235 images/s) and the defaults (73,703).
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_campaign

    recorded = ROOT / "benchmarks" / "gpu_runs" / "2026-11-25-h100" / "3-ten-vlm_mc-latentwire" / "studies-ten-vlm_mc-latentwire.db"
    database = Path(shutil.copy(recorded, tmp_path / "autotune.db"))  # the committed file stays as it was recorded
    seen = gpu_campaign.trial_figures(database, "vlm_mc", "h100", "small")
    assert seen["study"] == "vlm_mc-h100-small" and seen["trials"] == 5 and seen["unit"] == "images"
    assert round(seen["baseline"]) == 235 and round(seen["best"]) == 73703 and seen["config"]["precompute"] == "device"
    assert gpu_campaign.trial_figures(database, "vlm_mc", "h100", "full") is None  # no such study
    assert gpu_campaign.trial_figures(tmp_path / "none.db", "vlm_mc", "h100", "small") is None
    row = gpu_campaign.summarise("vlm_mc", {"workload": "vlm_mc", "size": "small", "error": "killed after 264 s",
                                            "trial_figures": seen}, tmp_path)
    assert row["verdict"] == "no result" and "preset" not in row and not (tmp_path / "presets").exists()
    line = gpu_campaign.markdown([row]).splitlines()[-1]
    assert line.startswith("| vlm_mc | small | 235 images/s (trial) | 73,703 images/s (trial) | 313.17x, not re-measured |")
    assert line.endswith("| no result: killed after 264 s |")


def test_a_child_at_the_deadline_is_stopped_first_and_killed_only_if_it_does_not_stop(tmp_path, monkeypatch):
    # Killed outright, a search late in its re-measurement exported nothing (lsd on the H200, 2026-11-27); asked
    # to stop as Ctrl-C asks, it exports from its whole rounds. A child that does not stop is still killed.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_campaign

    monkeypatch.setattr(gpu_campaign, "STOP_GRACE", 2.0)
    log = tmp_path / "log.txt"
    stops = ("import signal, sys, time\n"
             "signal.signal(signal.SIGTERM, lambda *a: (print('{\"stopped\": true}', flush=True), sys.exit(0)))\n"
             "time.sleep(60)\n")
    done = gpu_campaign.run_child([sys.executable, "-c", stops], tmp_path, log, "stops", limit=3.0,
                                  stdout=subprocess.PIPE)
    assert done.returncode == 0 and json.loads(done.stdout) == {"stopped": True}
    assert "(stopped at 1 s: the part's deadline)" in log.read_text()
    ignores = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    assert gpu_campaign.run_child([sys.executable, "-c", ignores], tmp_path, log, "ignores", limit=3.0,
                                  stdout=subprocess.PIPE) is None


def test_a_winner_re_measured_in_fewer_rounds_than_asked_says_so_beside_its_speedup(tmp_path):
    # A search the part's deadline stopped late in its re-measurement exports from its whole rounds: the row
    # must not read as if every round asked for was run.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_campaign

    measured = {"throughput": 300.0, "peak_memory_bytes": 2**30}
    result = {"device": "h200", "size": "full", "unit": "frames", "counts": {"ok": 4}, "trials_run": 4,
              "speedup": 35.2, "winner": {"config": {}, "measured": measured, "statuses": ["ok"]},
              "baseline": {"measured": {"throughput": 8.5}, "statuses": ["ok"]}}
    row = gpu_campaign.summarise("lsd", result, tmp_path, rounds=2)
    assert row["rounds"] == "1 of 2 rounds"
    assert "| 35.20x (1 of 2 rounds) |" in gpu_campaign.markdown([row])
    assert "| 8.5 frames/s | 300 frames/s |" in gpu_campaign.markdown([row])  # lsd's 8.52 at full read "9 frames/s"
    assert "rounds" not in gpu_campaign.summarise("lsd", result, tmp_path, rounds=1)
