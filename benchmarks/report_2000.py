"""Time and size of the report of a 2,000-trial study (target: under 10 s and 15 MB).

The study's figures are made up, but it is recorded as `search` records one
(chmm's knobs on the CPU, the same attributes, constraints and objective),
with every status and errors; it lives in SQLite as a real study does.

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.devices import get_profile  # noqa: E402
from autotune.loop import tell  # noqa: E402
from autotune.report import write_report  # noqa: E402
from autotune.runner import TrialResult  # noqa: E402
from autotune.samplers import OBJECTIVES  # noqa: E402
from autotune.space import load_space  # noqa: E402
from autotune.trials import to_attrs  # noqa: E402

#: chmm's own space on the CPU, so the report draws the knobs, conditions and values a real study has.
SPACE = load_space("chmm").for_device(get_profile("cpu"))


def make_study(path: Path, trials: int) -> optuna.Study:
    """A study recorded as `search` records one (the same attributes, constraints and objectives), with made-up figures."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{path}", study_name="chmm-cpu-small",
                                directions=OBJECTIVES, sampler=optuna.samplers.RandomSampler(seed=0))
    for key, value in {"workload": "chmm", "device": "cpu", "size": "small", "unit": "timesteps"}.items():
        study.set_user_attr(key, value)
    rng = random.Random(0)
    for number in range(trials):
        trial = study.ask()
        config = SPACE.suggest(trial)
        status = rng.choices(["ok", "incorrect", "error", "timeout", "crash", "oom"], [70, 15, 6, 3, 3, 3])[0]
        wall_seconds = rng.uniform(1, 20)
        if status in ("ok", "incorrect"):
            throughput = rng.lognormvariate(10, 1)
            seconds = 10_000 / throughput
            figures: dict = {
                "items_per_run": 10_000, "throughput": throughput, "median_seconds": seconds,
                "iqr_seconds": 0.05 * seconds, "times": [seconds * rng.uniform(0.97, 1.05) for _ in range(5)],
                "peak_memory_bytes": rng.randint(250, 500) << 20,
                "check": {"error": 1e-7 if status == "ok" else 3e-3, "tolerance": 1e-5, "passed": status == "ok"}}
        else:
            figures = {"error": f"{status}: synthetic failure of trial {number}"}
        result = TrialResult(status=status, config=config.to_dict(), unit="timesteps", wall_seconds=wall_seconds,
                             **figures)
        role = "baseline" if number == 0 else "search"
        for key, value in to_attrs(result, config, role, None).items():
            trial.set_user_attr(key, value)
        tell(study, trial, result, memory_budget_bytes=None, memory_bytes=16 << 30)
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
