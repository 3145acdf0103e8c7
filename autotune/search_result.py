"""What a search found: the winner, the baseline beside it, every trial, the export."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autotune.export import ExportDocument
    from autotune.choices import ChoiceOutcome
    from autotune.selection import Candidate
    from autotune.trials import TrialRecord

__all__ = ["SearchResult"]


@dataclass(repr=False)
class SearchResult:
    """What a search found; ``winner`` is ``None`` when no config passed its check."""

    workload: str
    device: str
    size: str
    study_name: str
    storage: str  # redacted
    unit: str
    trials: list[TrialRecord]
    counts: dict[str, int]  # statuses over the whole study
    candidates: list[Candidate]
    winner: Candidate | None
    baseline: Candidate | None
    speedup: float | None
    export_path: Path | None
    document: ExportDocument | None
    seconds: float
    choices: list[ChoiceOutcome] = field(default_factory=list)
    unused: tuple[str, ...] = ()  # the winner's knobs that its other knobs leave inactive (at their defaults)
    restricted: int = 0  # the study's asks for a config that breaks a constraint: never measured, never a trial
    only_baseline: bool = False  # the study measured the baseline alone, and the space's defaults are another config

    def __repr__(self) -> str:
        from autotune import console  # click: not for the tuner's own import
        from autotune.config import no_effect

        # What a notebook cell shows for `tuner.search(20)`: the answer, not every run's time of every trial
        # (the dataclass's own repr was 60,000 characters for a search of 3 trials).
        statuses = ", ".join(f"{status} {n}" for status, n in sorted(self.counts.items()))
        found = "no winner: no config passed its check and fit the memory budget"
        if self.winner is not None:
            measurement = self.winner.measurement
            rate = f" at {console.rate(measurement.throughput, self.unit)}" if measurement is not None else ""
            speedup = f", {self.speedup:.2f}x the baseline's" if self.speedup else ""
            # Its knobs in effect, as `search` prints it: a value of one its others leave off reads as tuned.
            used = {k: v for k, v in self.winner.config.to_dict().items() if k not in self.unused}
            unused = f" {no_effect(self.unused)}" if self.unused else ""
            found = f"winner trial #{self.winner.trial} {used}{unused}{rate}{speedup}"
        export = f"; exported to {str(self.export_path)!r}" if self.export_path is not None else ""
        # As `search` says it: a repeat of a measured config is no trial ("31 trials" where 6 configs were measured).
        return (f"SearchResult({self.workload!r} at {self.size!r} on {self.device!r}: {found}; "
                f"{console.configs_measured(self.trials)} in {self.seconds:.0f} s; study {self.study_name!r} in "
                f"{self.storage!r} ({statuses}){export})")
