"""How far each check's bound sits above the honest error the GPUs gave: read from the committed GPU studies.

`check_power.py` measures each tolerance against the honest error and planted bugs on this CPU. A GPU runs
other kernels (cuDNN, flash attention, TF32 paths), so its honest error may be larger: every trial that passed
its check in a study under ``benchmarks/gpu_runs/`` is a measurement of it. For each study, output (metric)
and bound (a bound belongs to a precision), this prints the trials that passed, the worst error among them and
its share of the bound; and of the trials the check failed, how many, and the smallest share among them (a
failure just over the bound may be honest error the bound is too tight for; one far over it is a wrong output).

    python benchmarks/gpu_margins.py                       # every committed GPU study
    python benchmarks/gpu_margins.py --markdown            # a table for the README or a note
    python benchmarks/gpu_margins.py path/to/studies.db    # one database
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "benchmarks" / "gpu_runs"
PRECISION_KNOBS = ("precision", "dtype")  # the knob that picks a bound, by the name each workload gives it


def checks(database: Path) -> list[dict[str, Any]]:
    """Every checked trial of every study in ``database``: study, precision, and each metric's error and bound."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        studies = dict(db.execute("SELECT study_id, study_name FROM studies"))
        attrs: dict[tuple[int, int], dict[str, Any]] = {}
        for study, number, key, value in db.execute(
                "SELECT t.study_id, t.number, a.key, a.value_json FROM trials t JOIN trial_user_attributes a "
                "ON a.trial_id = t.trial_id WHERE a.key IN ('check', 'config', 'duplicate_of')"):
            attrs.setdefault((study, number), {})[key] = json.loads(value)
    found = []
    for (study, number), seen in sorted(attrs.items()):
        check = seen.get("check")
        if not check or "duplicate_of" in seen:  # a repeat carries its original's check: counted once
            continue
        config = seen.get("config") or {}
        precision = next((str(config[k]) for k in PRECISION_KNOBS if k in config), "-")
        metrics = check.get("metrics") or {check["metric"]: [check["error"], check["tolerance"]]}
        for metric, (error, bound) in metrics.items():
            found.append({"study": studies[study], "trial": number, "precision": precision, "metric": metric,
                          "error": error, "bound": bound, "passed": error is not None and error <= bound})
    return found


def margins(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per study, metric and bound: the passing trials' worst share of the bound, the failing ones'
    smallest."""
    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["study"], row["metric"], row["bound"]), []).append(row)
    lines = []
    for (study, metric, bound), members in sorted(groups.items()):
        passed = [r for r in members if r["passed"]]
        failed = [r for r in members if not r["passed"]]
        worst = max(passed, key=lambda r: r["error"]) if passed else None
        nearest = min(failed, key=lambda r: r["error"] if r["error"] is not None else float("inf")) if failed else None
        lines.append({
            "study": study, "metric": metric, "bound": bound,
            "precisions": sorted({r["precision"] for r in members}),
            "passed": len(passed), "worst_error": worst["error"] if worst else None,
            "worst_share": worst["error"] / bound if worst and bound else None,
            "worst_trial": worst["trial"] if worst else None,
            "failed": len(failed),
            "nearest_failure_share": (nearest["error"] / bound if nearest and nearest["error"] is not None and bound
                                      else None),
        })
    return lines


def databases(paths: list[str]) -> list[Path]:
    chosen = [Path(p) for p in paths] or sorted(RUNS.rglob("*.db"))
    missing = [str(p) for p in chosen if not p.is_file()]
    if missing:
        raise SystemExit(f"gpu_margins.py: no such database: {', '.join(missing)}")
    return chosen


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("databases", nargs="*", help="study databases (default: every .db under benchmarks/gpu_runs)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--json", action="store_true", help="print the lines as JSON")
    args = parser.parse_args(argv)
    lines = []
    for database in databases(args.databases):
        for line in margins(checks(database)):
            lines.append({"database": str(database.relative_to(ROOT) if database.is_relative_to(ROOT) else database),
                          **line})
    if args.json:
        print(json.dumps(lines, indent=1))
        return 0
    header = ["database", "study", "metric", "precisions", "bound", "passed", "worst honest error", "share",
              "failed", "nearest failure's share"]
    table = [[line["database"], line["study"], line["metric"], " ".join(line["precisions"]), f"{line['bound']:g}",
              str(line["passed"]), "-" if line["worst_error"] is None else f"{line['worst_error']:.3g}",
              share(line["worst_share"]), str(line["failed"]), share(line["nearest_failure_share"])]
             for line in lines]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + " --- |" * len(header))
        for row in table:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(h), *(len(r[i]) for r in table)) if table else len(h) for i, h in enumerate(header)]
        for row in [header, *table]:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
