"""Search progress on stderr: one plain line per trial, below them a bar on a terminal."""

from __future__ import annotations

import os
import sys
from typing import Any

from autotune.console import borrowed_cores, format_bytes, rate, tell
from autotune.devices import cpu_threads

__all__ = ["Progress", "over_budget", "terminal_width"]


def over_budget(budget: int | None) -> str:
    """What a trial's progress line, and its row in the report, say of a pass over ``--memory-budget``."""
    return f"over --memory-budget {format_bytes(budget)}: it cannot win"


def terminal_width() -> int:
    """Columns of the terminal on stderr; 0 when it is no terminal (or one that reports no width)."""
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns if sys.stderr.isatty() else 0
    except OSError:
        return 0


class Progress:
    """Search progress on stderr: one plain line per trial, below them a bar on a terminal.

    The bar counts measured configs against ``--trials`` and shows the best
    correct throughput in the study so far (of configs within ``--memory-budget``:
    one over it can never win), the last trial's status and the count per status.
    """

    def __init__(self, quiet: bool, total: int | None, bar: bool | None = None, prefix: str = "",
                 unit: str = "trial", memory_budget_bytes: int | None = None) -> None:
        self.quiet = quiet
        self.memory_budget_bytes = memory_budget_bytes
        self.prefix = prefix
        self.best: float | None = None
        self.best_unit: str | None = None  # a trial that timed out or crashed reports no unit of its own
        self.counts: dict[str, int] = {}
        self.bar = None
        if not quiet and (terminal_width() > 0 if bar is None else bar):
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit=unit, file=sys.stderr)

    def _echo(self, line: str) -> None:
        line = self.prefix + line
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            tell(line)

    def stage(self, message: str) -> None:
        if not self.quiet:
            self._echo(f"autotune: {message}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def step(self, done: int, total: int, what: str) -> None:
        """A measurement of ``explain`` starts: ``done`` of ``total`` are measured (the total can grow)."""
        if self.quiet:
            return
        if self.bar is None:
            if done < total:
                self._echo(f"autotune: [{done + 1}/{total}] {what}")
            return
        self.bar.total = total
        self.bar.n = min(done, total)
        self.bar.set_postfix_str(what if done < total else "all measured", refresh=False)
        self.bar.refresh()

    def trial(self, record: Any, index: int, total: int) -> None:
        result = record.result
        self.best_unit = result.unit or self.best_unit
        if record.study_best:  # trials of earlier runs of the study, or of other workers
            self.best = max(self.best or 0.0, record.study_best)
        over = result.status == "ok" and not record.fits_memory
        if result.status == "ok" and result.throughput is not None and not over and not record.loose:
            self.best = max(self.best or 0.0, result.throughput)
        if record.duplicate_of is None:
            self.counts[result.status] = self.counts.get(result.status, 0) + 1
        if self.quiet:
            return
        if self.bar is not None:  # and its line above the bar: a failed trial's error, a note, were said only piped
            self.bar.set_postfix_str(
                f"best {rate(self.best, self.best_unit)}, last {result.status}, "
                + " ".join(f"{k} {v}" for k, v in sorted(self.counts.items())), refresh=False
            )
            if record.duplicate_of is None:
                self.bar.update(1)
            else:
                self.bar.refresh()
        width = len(str(total))
        figures = f"{rate(result.throughput, result.unit):>22}  {format_bytes(result.peak_memory_bytes):>10}"
        note = f"  (same config as #{record.duplicate_of}: not re-run, not counted)" if record.duplicate_of is not None else ""
        note += f"  ({over_budget(self.memory_budget_bytes)})" if over else ""
        note += f"  ({record.loose})" if record.loose else ""
        if result.cut_short:
            note += ("  (cut short: its first output is wrong)" if result.status == "incorrect"
                     else "  (cut short once warm: over 3x slower than the best)")
        if record.duplicate_of is None and result.beside_other_work:
            note += f"  (timed beside other work: {result.busy_elsewhere:.1f} of {cpu_threads()} cores busy)"
        if record.duplicate_of is None and (borrowed := borrowed_cores(result.cores_used, result.threads)):
            note += f"  (its timed runs kept {borrowed})"
        error = f"  {result.error}" if result.error and result.status != "ok" else ""
        role = record.role if record.role in ("baseline", "defaults", "probe") else ""
        counter = f"{index:>{width}}" if record.duplicate_of is None else " " * (width - 1) + "="
        # Fixed-width fields up to trial #999, so that the figures of trial #9 and #10 line up.
        self._echo(
            f"[{counter}/{total}] trial #{record.number:<3} {role:<8} {result.status:<9} {figures}  "
            f"best {rate(self.best, self.best_unit)}  {record.config.describe(record.unused)}{note}{error}"
        )
