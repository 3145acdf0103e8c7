"""How close each search strategy gets to the best config in few evaluations, on recorded spaces.

Every strategy of ``autotune.samplers`` runs through autotune's own search
loop (``autotune.simulate``: repeats, restrictions and the enqueued baseline
as in ``search``), on the study ``search`` makes (throughput alone) and,
suffixed ``/two-objectives``, on the study of throughput and peak memory that
autotune made before; ``plain-tpe`` is the reference of
``../shared/recorded/README.md``: Optuna's TPESampler on one objective, one
``suggest_categorical`` per parameter, an unrecorded combination told as
failed and not counted (a config it asks for again counts as an evaluation;
``plain-tpe-unique`` counts only new configs). Scores (0 = random search on average, 1 = the
optimum) at 20, 50 and 100 evaluations, mean and standard deviation over the
repeats, side by side in one run; the same at the time that 20, 50 and 100
evaluations take on average by the file's recorded costs (compile, benchmark
...: ``autotune.simulate.time_score``); and the strategy's own wall time per
evaluation on this machine.

Examples::

    python benchmarks/search_quality.py                      # every file, every strategy, 20 repeats
    python benchmarks/search_quality.py --repeats 5 --strategies tpe random --markdown
    python benchmarks/search_quality.py --recorded ../shared/recorded/pnpoly_RTX_3090.json.gz
    python benchmarks/search_quality.py --recorded benchmarks/held_out/convolution_RTX_2080_Ti.json.gz

The default list leaves out ``benchmarks/held_out/``: a space no strategy was
chosen by, scored only when named (its README says why).

Every figure this script gave while the default was chosen, with its command,
is in ``benchmarks/search_quality.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.recorded import Recorded, load_recorded  # noqa: E402
from autotune.samplers import SAMPLERS  # noqa: E402
from autotune.simulate import Repeat, simulate, summary  # noqa: E402

BUDGETS = ("20", "50", "100")
#: Scores at the time that 20, 50 and 100 evaluations take on average (autotune.simulate.time_score).
TIME_BUDGETS = tuple(f"time {m}" for m in BUDGETS)
#: A strategy name with this suffix runs on a study of two objectives (throughput, peak memory), as
#: autotune made its studies before; without it, on the study `search` makes now (throughput alone).
TWO_OBJECTIVES = "/two-objectives"
#: The reference with a repeated config told its recorded value again but not counted as an evaluation.
UNIQUE = "plain-tpe-unique"
STRATEGIES = ["plain-tpe", UNIQUE, *SAMPLERS, *(f"{name}{TWO_OBJECTIVES}" for name in SAMPLERS if name != "random")]
DEFAULT_FILES = sorted((ROOT.parent / "shared" / "recorded").glob("*.json.gz")) + sorted(
    (ROOT / "benchmarks" / "recorded").glob("*.json.gz"))


def plain_tpe(recorded: Recorded, trials: int, seed: int, count_repeats: bool = True) -> Repeat:
    """The README's reference: single-objective TPE, unrecorded combinations told as failed, not counted.

    Optuna's TPE asks again for configs it has seen; each such ask counts as an evaluation, as it costs
    one in a tuner that does not keep its measurements. ``count_repeats=False`` counts only new configs.
    """
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    started = time.perf_counter()
    study = optuna.create_study(direction=recorded.direction, sampler=optuna.samplers.TPESampler(seed=seed))
    choices = {name: recorded.space.parameters[name].choices for name in recorded.order}
    best, best_so_far, asks, spent, seconds_so_far, seen = None, [], 0, 0.0, [], set()
    while len(best_so_far) < trials and asks < 50 * trials:
        asks += 1
        trial = study.ask()
        values = {name: trial.suggest_categorical(name, list(options)) for name, options in choices.items()}
        key = ",".join(str(values[name]) for name in recorded.order)
        entry = recorded.entries.get(key)
        if entry is None:
            study.tell(trial, state=TrialState.FAIL)
            continue
        value = entry.get(recorded.objective)
        if recorded.loss_of(entry) is not None:  # it ran
            study.tell(trial, value)
            best = value if recorded.better(value, best) else best
        else:
            study.tell(trial, state=TrialState.FAIL)
        if not count_repeats and key in seen:
            continue
        seen.add(key)
        best_so_far.append(best)
        spent += recorded.result(values).wall_seconds or 0.0
        seconds_so_far.append(spent)
    return Repeat(seed, len(best_so_far), best_so_far, time.perf_counter() - started, seconds_so_far)


def run_one(path: str, strategy: str, trials: int, repeats: int, seed: int) -> dict[str, Any]:
    recorded = load_recorded(path)
    if strategy in ("plain-tpe", UNIQUE):
        runs = [plain_tpe(recorded, trials, seed + i, strategy == "plain-tpe") for i in range(repeats)]
    elif strategy.endswith(TWO_OBJECTIVES):
        name = strategy.removesuffix(TWO_OBJECTIVES)
        runs = [simulate(recorded, trials, seed + i, name, objectives=2) for i in range(repeats)]
    else:
        runs = [simulate(recorded, trials, seed + i, strategy) for i in range(repeats)]
    return {"recorded": Path(path).name, "strategy": strategy, **summary(recorded, runs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recorded", nargs="+", type=Path, default=DEFAULT_FILES)
    parser.add_argument("--strategies", nargs="+", default=STRATEGIES, choices=STRATEGIES)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="processes (one strategy and file each)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table (for the README)")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if not args.recorded:
        parser.error("no recorded spaces found; pass --recorded FILE ...")
    jobs = [(str(p), s, args.trials, args.repeats, args.seed) for p in args.recorded for s in args.strategies]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(run_one, *zip(*jobs)))
    for row in rows:
        print(f"{row['recorded']:<32} {row['strategy']:<18} " + "  ".join(
            f"@{m} {row[m]['mean']:+.2f}±{row[m]['std']:.2f}" for m in BUDGETS + TIME_BUDGETS if row[m]["mean"] is not None)
            + f"  {1000 * row['seconds_per_evaluation']:.1f} ms/eval", file=sys.stderr)
    means: dict[str, dict[str, float]] = {}
    for strategy in args.strategies:
        mine = [r for r in rows if r["strategy"] == strategy]
        means[strategy] = {m: sum(r[m]["mean"] for r in mine) / len(mine) for m in BUDGETS + TIME_BUDGETS
                           if all(r[m]["mean"] is not None for r in mine)}
    if args.markdown:
        print("| recorded space | strategy | score at 20 | at 50 | at 100 | at the time of 20 | of 50 | of 100 "
              "| ms per evaluation |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r['recorded']} | {r['strategy']} | " + " | ".join(
                f"{r[m]['mean']:.2f} ± {r[m]['std']:.2f}" if r[m]["mean"] is not None else "-"
                for m in BUDGETS + TIME_BUDGETS) + f" | {1000 * r['seconds_per_evaluation']:.1f} |")
        for strategy, m in means.items():
            print(f"| **mean over the spaces** | {strategy} | " + " | ".join(
                f"{m[b]:.2f}" if b in m else "-" for b in BUDGETS + TIME_BUDGETS) + " | |")
    else:
        for strategy, m in means.items():
            print(f"{strategy:<18} mean score " + "  ".join(f"at {b}: {m[b]:.2f}" for b in BUDGETS + TIME_BUDGETS
                                                          if b in m))
    print(f"({args.repeats} repeats, {args.trials} evaluations, {time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "means": means}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
