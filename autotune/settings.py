"""The settings of one search, built once from the command line and handed to workers as JSON.

``autotune search`` parses its options into a :class:`SearchSettings` and
makes every :class:`~autotune.tuner.Tuner` from it (:meth:`SearchSettings.tuner`):
the driver's, and each worker's, which reads the same settings from a file
(``python -m autotune._worker SETTINGS INDEX BUDGET``). Workers never parse a
command line again, so ``autotune.cli.main([...])`` called from Python gives
them the options it was given. The storage URL is left out of the file: it
may hold a password, and reaches workers in their environment
(``AUTOTUNE_STORAGE``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from autotune.storage import DEFAULT_GRACE_PERIOD, DEFAULT_HEARTBEAT, storage_kind

if TYPE_CHECKING:
    from autotune.tuner import Tuner

__all__ = ["SearchSettings"]


@dataclass(frozen=True)
class SearchSettings:
    """Every option of a search that a tuner is made from (the CLI's defaults)."""

    workload: str
    device: str = "auto"
    size: str | None = None
    storage: str | None = None  # never written to JSON (see the module docstring)
    study_name: str | None = None
    studies: str | None = None
    isolation: str = "subprocess"
    trial_timeout: float | None = None  # the runner's default (600 s)
    memory_budget_bytes: int | None = None
    memory_limit_bytes: int | None = None
    min_time: float = 1.0
    remeasure_top: int = 3
    remeasure_rounds: int = 3
    time_budget: float | None = None
    seed: int | None = None
    threads: int | None = None
    heartbeat: int = DEFAULT_HEARTBEAT
    grace_period: int = DEFAULT_GRACE_PERIOD
    quiet: bool = False
    sampler: str | None = None  # a strategy of autotune.samplers (default: samplers.DEFAULT)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        del data["storage"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], storage: str | None = None) -> "SearchSettings":
        known = {f.name for f in dataclasses.fields(cls)} - {"storage"}
        return cls(**{k: v for k, v in data.items() if k in known}, storage=storage)

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path

    @classmethod
    def read(cls, path: Path, storage: str | None = None) -> "SearchSettings":
        return cls.from_json(json.loads(Path(path).read_text()), storage)

    def tuner(self, on_trial: Callable[..., None] | None = None, on_stage: Callable[[str], None] | None = None,
              worker_index: int | None = None) -> "Tuner":
        """The tuner these settings describe (a worker's seed is offset by its index: one seed, one sequence)."""
        from autotune.runner import Runner
        from autotune.tuner import Tuner

        runner = Runner(self.isolation, self.trial_timeout)
        runner.start()  # its fork server imports torch while the tuner imports the workload: seconds a search
        # Each worker its own seed, kept within the 32 bits a sampler's generator takes (--seed may be the last).
        seed = self.seed if self.seed is None or worker_index is None else (self.seed + worker_index) % 2**32
        server = self.storage is not None and storage_kind(self.storage) == "server"
        try:
            return Tuner(
                self.workload, self.device, self.size, storage=self.storage, study_name=self.study_name,
                studies=self.studies,
                memory_budget_bytes=self.memory_budget_bytes, memory_limit_bytes=self.memory_limit_bytes,
                measurer={"min_time": self.min_time}, remeasure_top=self.remeasure_top,
                remeasure_rounds=self.remeasure_rounds, time_budget=self.time_budget, seed=seed, threads=self.threads,
                on_trial=on_trial, on_stage=on_stage, heartbeat=self.heartbeat if server else None,
                grace_period=self.grace_period, sampler=self.sampler, runner=runner,  # with the isolation and timeout
                trial_timeout=self.trial_timeout,  # checked against the isolation
            )
        except BaseException:
            runner.close()  # a refused search (an unknown size, say) leaves no server importing torch behind
            raise
