"""Time and size of the report of a 2,000-trial study (target: under 10 s and 15 MB).

The study is synthetic but shaped like a real one: seven knobs, every status,
errors, repeats; it lives in SQLite as a real study does.

    python benchmarks/report_2000.py [--trials 2000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.report import write_report  # noqa: E402

SPACE = {
    "messages": CategoricalDistribution(["loop", "numba", "scan"]),
    "chunk_size": IntDistribution(8, 4096, log=True),
    "dtype": CategoricalDistribution(["float64", "float32", "bfloat16", "float16"]),
    "debug_asserts": CategoricalDistribution([True, False]),
    "indices": CategoricalDistribution(["per_step", "precomputed", "block_views"]),
    "workspace": CategoricalDistribution([False, True]),
    "update_c": CategoricalDistribution(["loop", "loop_outer", "grouped"]),
}


def make_study(path: Path, trials: int) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{path}", study_name="chmm-cpu-small",
                                directions=["maximize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=0))
    for key, value in {"workload": "chmm", "device": "cpu", "size": "small", "unit": "timesteps"}.items():
        study.set_user_attr(key, value)
    rng = random.Random(0)
    for number in range(trials):
        trial = study.ask(SPACE)
        config = dict(trial.params)
        status = rng.choices(["ok", "incorrect", "error", "timeout", "crash", "oom"], [70, 15, 6, 3, 3, 3])[0]
        throughput = rng.lognormvariate(10, 1)
        trial.set_user_attr("status", status)
        trial.set_user_attr("config", config)
        trial.set_user_attr("wall_seconds", rng.uniform(1, 20))
        if status in ("ok", "incorrect"):
            trial.set_user_attr("throughput", throughput)
            trial.set_user_attr("peak_memory_bytes", rng.randint(250, 500) << 20)
            trial.set_user_attr("median_seconds", 10_000 / throughput)
            trial.set_user_attr("iqr_seconds", 0.05 * 10_000 / throughput)
            trial.set_user_attr("check", {"error": 1e-7 if status == "ok" else 3e-3, "tolerance": 1e-5,
                                          "passed": status == "ok"})
            trial.set_constraint("correct", 0.0 if status == "ok" else 1.0)
            study.tell(trial, [throughput, float(rng.randint(250, 500) << 20)])
        else:
            trial.set_user_attr("error", f"{status}: synthetic failure of trial {number}")
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
    return study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        study = make_study(Path(tmp) / "study.db", args.trials)
        print(f"made a {args.trials}-trial study in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        path = write_report(study, Path(tmp) / "report.html")
        seconds = time.perf_counter() - started
        size = path.stat().st_size
        print(f"report of {args.trials} trials: {seconds:.2f} s, {size / 2**20:.2f} MiB "
              f"(targets: < 10 s, < 15 MB: {'met' if seconds < 10 and size < 15e6 else 'NOT met'})")


if __name__ == "__main__":
    main()
