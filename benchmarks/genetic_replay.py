"""Kernel Tuner's genetic algorithm, replayed outside autotune's loop on recorded spaces.

The issue names "the genetic algorithm Kernel Tuner found strongest on these
spaces"; ``--sampler genetic`` is Optuna's NSGA-II, a different algorithm.
This replays the one of Kernel Tuner's documentation (its
``genetic_algorithm`` strategy, with its defaults): a population of 30
allowed configs drawn at random; each generation ranks them by time, and
pairs drawn with a Beta(1, 2.5) weight on rank (the fastest most often)
make two children each by crossover; a child is moved to a random
neighbour (one knob changed, an allowed config) with chance 1 in 20;
children that break a restriction, or repeat one already in the new
generation, are dropped. A config measured before is answered from memory
and not counted again, as Kernel Tuner's cache does. As in
``linear_variants.py``, the file's first config is measured first (as the
baseline is in a search). Scored like ``search_quality.py``
(``autotune.simulate.score``).

Examples::

    python benchmarks/genetic_replay.py --repeats 50
    python benchmarks/genetic_replay.py --population 20 --mutation 10 --crossover disruptive --repeats 50
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.recorded import Recorded, load_recorded  # noqa: E402
from autotune.simulate import Repeat, summary  # noqa: E402

RECORDED = ROOT.parent / "shared" / "recorded"
SPACES = [RECORDED / "convolution_A100.json.gz", RECORDED / "dedispersion_MI250X.json.gz",
          RECORDED / "pnpoly_RTX_3090.json.gz"]
# Generations in a row that bring no new config before the search is over (the population has converged).
STALL = 50


def coded(recorded: Recorded) -> tuple[np.ndarray, np.ndarray]:
    """Every recorded config as its knobs' value indices (one row each), and its loss (NaN: failed)."""
    index = {p: {str(c): i for i, c in enumerate(recorded.space.parameters[p].choices)} for p in recorded.order}
    rows, losses = [], []
    for entry in recorded.entries.values():
        # -1: a knob the config leaves out (inactive in a conditional space such as chmm's)
        rows.append([index[p].get(str(entry.get(p)), -1) for p in recorded.order])
        loss = recorded.loss_of(entry)
        losses.append(np.nan if loss is None else loss)
    return np.array(rows), np.array(losses)


def search(codes: np.ndarray, losses: np.ndarray, rng: np.random.Generator, trials: int,
           population: int = 30, mutation: float = 20, crossover: str = "uniform",
           row_of: dict[tuple, int] | None = None) -> list[int]:
    """The rows the genetic algorithm evaluates, in order, until ``trials`` distinct ones (or it converges).

    ``row_of`` (each config's row, :func:`rows_of`) is derived from ``codes``; pass it when searching one space
    many times, as building it costs more than a search.
    """
    n = len(codes)
    row_of = rows_of(codes) if row_of is None else row_of
    evaluated, seen = [0], {0}

    def fitness(row: int) -> float:
        if row not in seen:
            seen.add(row)
            evaluated.append(row)
        return np.inf if np.isnan(losses[row]) else losses[row]

    generation = list(rng.choice(n, size=max(2, min(population, n // 2)), replace=False))
    stalled = 0
    while len(evaluated) < trials and stalled < STALL:
        before = len(evaluated)
        ranked = [row for _, row in sorted((fitness(row), row) for row in generation)]
        children: list[int] = []
        for _ in range(100 * len(generation)):
            if len(children) >= len(generation):
                break
            first, second = _parents(len(ranked), rng)
            a, b = codes[ranked[first]], codes[ranked[second]]
            for child in _cross(a, b, rng, crossover):
                if rng.random() * mutation < 1:
                    neighbours = np.flatnonzero((codes != child).sum(1) == 1)
                    child = codes[rng.choice(neighbours)] if len(neighbours) else child
                row = row_of.get(tuple(child))  # None: the child breaks a restriction of the space
                if row is not None and row not in children and len(children) < len(generation):
                    children.append(row)
        generation = children or generation
        stalled = stalled + 1 if len(evaluated) == before else 0
    return evaluated[:trials]


def rows_of(codes: np.ndarray) -> dict[tuple, int]:
    """Each recorded config's row, by its value indices (a combination absent from it breaks a restriction)."""
    return {tuple(code): i for i, code in enumerate(codes)}


def _parents(size: int, rng: np.random.Generator) -> tuple[int, int]:
    """Two different ranks, the best most likely (Kernel Tuner's Beta(1, 2.5) draw)."""
    first = int(rng.beta(1, 2.5) * size)
    second = first
    while second == first:
        second = int(rng.beta(1, 2.5) * size)
    return first, second


def _cross(a: np.ndarray, b: np.ndarray, rng: np.random.Generator, crossover: str) -> tuple[np.ndarray, np.ndarray]:
    """Two children: each knob from either parent (uniform), or half the knobs that differ swapped (disruptive)."""
    if crossover == "uniform":
        keep = rng.random(len(a)) < 0.5
    else:
        differ = np.flatnonzero(a != b)
        keep = np.ones(len(a), dtype=bool)
        if len(differ):
            keep[rng.choice(differ, size=(len(differ) + 1) // 2, replace=False)] = False
    return np.where(keep, a, b), np.where(keep, b, a)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recorded", nargs="+", type=Path, default=SPACES)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--population", type=int, default=30)
    parser.add_argument("--mutation", type=float, default=20, help="a child mutates with chance 1 in this")
    parser.add_argument("--crossover", choices=["uniform", "disruptive"], default="uniform")
    args = parser.parse_args(argv)
    budgets = tuple(m for m in (20, 50, 100) if m <= args.trials)
    means = {m: [] for m in budgets}
    for path in args.recorded:
        recorded = load_recorded(path)
        codes, losses = coded(recorded)
        row_of, started, repeats = rows_of(codes), time.perf_counter(), []
        for seed in range(args.repeats):
            rows = search(codes, losses, np.random.default_rng(seed), args.trials, args.population,
                          args.mutation, args.crossover, row_of)
            found = np.fmin.accumulate(losses[rows])
            # Back from the loss to the file's units (1/loss where the objective is a maximised rate).
            best_so_far = [None if np.isnan(v) else float(1 / v if recorded.maximized else v) for v in found]
            repeats.append(Repeat(seed, len(rows), best_so_far))
        scores = summary(recorded, repeats, budgets)  # scored as search_quality.py scores (b(M) once per budget)
        for m in budgets:
            means[m].append(scores[str(m)]["mean"])
        figures = "  ".join(f"at {m}: {scores[str(m)]['mean']:.2f} ± {scores[str(m)]['std']:.2f}" for m in budgets)
        print(f"{path.name}: {figures}  ({args.repeats} repeats, {time.perf_counter() - started:.0f} s)", flush=True)
    print("mean over the spaces: " + "  ".join(f"at {m}: {np.mean(v):.2f}" for m, v in means.items()))


if __name__ == "__main__":
    main()
