"""How strong each workload's check is: honest error against tolerance, planted bugs against the bound.

For every workload and every precision the CPU space offers, on `tiny` (or ``--size``):

* the honest sweep: the baseline with each value of each knob (one at a
  time, at that precision), over several data seeds, each checked against the
  reference of its own seed; the worst error of each output, as a fraction of
  its tolerance, and the worst output overall;
* the negative control each trial's check is held to: each honest run's
  output made plainly wrong (``autotune.check.wrong_copy``), and each of its
  parts made wrong alone (``wrong_parts``), and how far past its bound the
  check put them (the smallest, over every copy, run and seed);
* the planted bugs of ``tests/mutants``, each under every data seed: how many
  fail the check at every seed, and the weakest one (the smallest error over
  its bound at any seed).

    python benchmarks/check_power.py                      # every workload, 3 seeds
    python benchmarks/check_power.py --workloads chmm ten --seeds 1
    python benchmarks/check_power.py --markdown           # the README's table
    python benchmarks/check_power.py --workloads ten --size small --precisions fp32 --seeds 1
    python benchmarks/check_power.py --workloads mine.py:MineWorkload   # a workload of one's own

A workload of one's own (``path/to/file.py:Class``) is swept and held to the control the same way, over its
precision knob (``precision``, or else ``dtype``), with one data seed unless its size has a ``seed`` parameter;
it has no planted bugs here (plant them as ``tests/mutants`` does).

torch.compile values are left out of the sweep (minutes of compilation on
this CPU); the workloads' tests check compiled runs separately.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from autotune.check import share_of_tolerance  # noqa: E402
from autotune.control import wrong_copy, wrong_parts  # noqa: E402
from tests.mutants import WORKLOADS, mutants_of  # noqa: E402
from tests.mutants.harness import Bench, knob_values  # noqa: E402


def honest(bench: Bench, precision: Any, worst: dict[str, float], ratio: dict[str, float],
           control: list[float]) -> int:
    """Check every knob value at ``precision``; keep each output's worst error in ``worst``, and its worst
    error over that run's bound in ``ratio`` (vlm_mc's bounds depend on the run), and in ``control`` how far
    past its bound each run's wrong copy went (its furthest metric: one past its bound fails it). Returns runs."""
    runs = 0
    for values in knob_values(bench):
        try:
            config = bench.config({**values, bench.precision_knob: precision})
            # A combination the space's constraints rule out is never run by a search (a chunk of mine that does not
            # divide the length raised in build: a traceback ended the sweep).
            if bench.space.violated(config) is not None:
                continue
            run = bench.workload.build(config)
        except ValueError:
            continue  # refused as named (a micro-batch the size cannot honour): not an honest run
        output = run()
        check = bench.workload.check(output, bench.reference, config)
        copies = [wrong_copy(output)] + [copy for _, copy in wrong_parts(output)]  # the whole, and each part alone
        checks = [bench.workload.check(copy, bench.reference, config) for copy in copies]
        control.append(min(max(share_of_tolerance(error, bound) for error, bound in wrong.metrics.values())
                           for wrong in checks))
        runs += 1
        for name, (error, bound) in check.metrics.items():
            worst[name] = max(worst.get(name, 0.0), error)
            ratio[name] = max(ratio.get(name, 0.0), share_of_tolerance(error, bound))
        if not check.passed:
            print(f"    honest run FAILED: {dict(values)} at {precision}: {check.metric} {check.error:.3g} > "
                  f"{check.tolerance:.3g}", file=sys.stderr)
    return runs


def measure(name: str, seeds: int, size: str = "tiny", precisions: list[str] | None = None) -> list[dict[str, Any]]:
    rows = []
    benches = [Bench.open(name, size)]
    if benches[0].precision_knob not in benches[0].space.parameters:
        raise SystemExit(f"check_power.py: {name} has no precision knob (precision or dtype) in its space")
    base_seed = benches[0].workload.params.get("seed")  # none: one data seed (a workload of one's own, say)
    benches += [Bench.open(name, size, params={"seed": base_seed + i}) for i in range(1, seeds if base_seed else 1)]
    for precision in benches[0].precisions:
        if precisions and str(precision) not in precisions:
            continue
        started = time.perf_counter()
        worst: dict[str, float] = {}
        honest_ratio: dict[str, float] = {}
        control: list[float] = []
        runs = sum(honest(bench, precision, worst, honest_ratio, control) for bench in benches)
        bench = benches[0]
        caught, weakest = 0, (math.inf, "", "")
        mutants = mutants_of(name) if name in WORKLOADS else []  # a workload of one's own: none planted here
        for mutant in mutants:
            # Planted under every data seed, as the honest sweep runs: a bug caught at one seed can pass at the
            # next (vlm_mc's wrong attention scale was caught at `tiny`'s seed and missed at the five after it).
            missed = []
            for seed_bench in benches:
                check = seed_bench.check(seed_bench.mutant_config(mutant, precision), mutant)
                if check.passed:
                    missed.append(seed_bench.workload.params["seed"])
                weakest = min(weakest, (share_of_tolerance(check.error, check.tolerance), mutant.name, check.metric))
            caught += not missed
            if missed:
                why = mutant.missed_in.get(f"{precision} at {size}",
                                           mutant.missed_in.get(str(precision), "undocumented"))
                print(f"    MISSED {mutant.name!r} at {precision}, data seed {', '.join(map(str, missed))}: {why}",
                      file=sys.stderr)
        config = bench.config({bench.precision_knob: precision})
        reference_check = bench.workload.check(bench.workload.build(config)(), bench.reference, config)
        tolerance_of = {k: t for k, (_, t) in reference_check.metrics.items()}
        binding = max(honest_ratio, key=honest_ratio.get)
        rows.append({
            "workload": name, "size": size, "precision": str(precision), "honest_runs": runs,
            "honest_worst": worst, "tolerance": tolerance_of,
            "honest_binding": binding, "honest_binding_error": worst[binding],
            "honest_binding_tolerance": tolerance_of[binding], "honest_worst_ratio": honest_ratio,
            "honest_binding_ratio": honest_ratio[binding],
            "weakest_mutant": weakest[1], "weakest_metric": weakest[2], "weakest_ratio": weakest[0],
            "caught": caught, "planted": len(mutants), "wrong_copy_ratio": min(control),
            "seconds": time.perf_counter() - started,
        })
        planted = (f"caught {caught}/{len(mutants)}; weakest {weakest[1]!r} at {weakest[0]:.3g}x ({weakest[2]})"
                   if mutants else "no bugs planted")
        print(f"{name} {size} {precision}: honest worst {binding} {worst[binding]:.2g} ({honest_ratio[binding]:.2f} of its "
              f"bound; {runs} runs); {planted}; wrong copy at {min(control):.3g}x at least", file=sys.stderr)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| workload | precision | honest worst: error (of its bound), output | weakest planted bug: error over "
             "its bound | caught / planted | wrong copy: error over its bound |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        weakest = "crashes (error)" if math.isinf(r["weakest_ratio"]) else f"{r['weakest_ratio']:.3g}x"
        weakest = f"{r['weakest_mutant']}: {weakest} ({r['weakest_metric']})" if r["planted"] else "none planted"
        lines.append(f"| {r['workload']} | {r['precision']} | {r['honest_binding_error']:.2g} "
                     f"({r['honest_binding_ratio']:.2f}), {r['honest_binding']} | {weakest} | {r['caught']} / "
                     f"{r['planted']} | {r['wrong_copy_ratio']:.3g}x |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS),
                        help=f"built-ins ({', '.join(WORKLOADS)}) or path/to/file.py:Class (default: the built-ins)")
    parser.add_argument("--seeds", type=int, default=3,
                        help="data seeds of the honest sweep and of every planted bug (default 3)")
    parser.add_argument("--size", default="tiny", help="workload size (default tiny; the tolerances were set there)")
    parser.add_argument("--precisions", nargs="+", default=None, help="only these precisions (default: all)")
    parser.add_argument("--markdown", action="store_true", help="print the README's table")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args()
    for name in args.workloads:
        if name not in WORKLOADS and ":" not in name:
            parser.error(f"--workloads: {name!r} is no built-in ({', '.join(WORKLOADS)}) nor a path/to/file.py:Class")
    torch.set_num_threads(2)
    rows = [row for name in args.workloads for row in measure(name, args.seeds, args.size, args.precisions)]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    print(markdown(rows) if args.markdown else json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
