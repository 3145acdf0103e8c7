"""A worker process of a shared search: ``python -m autotune._worker SETTINGS INDEX BUDGET``.

Started by ``autotune search --workers N`` (see :mod:`autotune.workers`),
never by hand. It makes its tuner from the settings file the driver wrote
(the storage comes from ``AUTOTUNE_STORAGE``), keeps to the cores it was
given, prints its per-trial lines prefixed ``[wINDEX]``, and takes trials
until the study holds BUDGET counted trials. SIGTERM stops it cleanly: its
running trial is marked lost and re-run by whoever resumes the study.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

from autotune.cli_options import show_warning
from autotune.progress import Progress
from autotune.exceptions import AutotuneError
from autotune.settings import SearchSettings
from autotune.shipped import take_builtin_names
from autotune.stopping import stop_on_sigterm
from autotune.storage import STORAGE_ENV
from autotune.workers import apply_cpu_pinning


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m autotune._worker SETTINGS INDEX BUDGET (started by `autotune search --workers`)",
              file=sys.stderr)
        return 2
    path, index, budget = Path(argv[0]), int(argv[1]), int(argv[2])
    take_builtin_names()  # started as `python -m`: a `workloads` package in the working directory came first
    warnings.showwarning = show_warning  # one line, as the driver's (a journal's torn record was two)
    settings = SearchSettings.read(path, storage=os.environ.get(STORAGE_ENV))
    apply_cpu_pinning()
    stop_on_sigterm()
    progress = Progress(settings.quiet, budget, bar=False, prefix=f"[w{index}] ",
                        memory_budget_bytes=settings.memory_budget_bytes)
    try:
        tuner = settings.tuner(on_trial=progress.trial, on_stage=progress.stage, worker_index=index)
        progress.best_unit = tuner.workload.unit  # another worker's best shows before a trial of this one
    except AutotuneError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return 2
    try:
        tuner.runner.warm_up()
        tuner.work(budget)
    except AutotuneError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        progress.stage("stopped; its unfinished trial is marked in the study")
        return 130
    finally:
        tuner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
