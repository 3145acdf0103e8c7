"""Variants of the linear model's choice rule, replayed outside autotune's loop on recorded spaces.

A scratch replay, faster than ``search_quality.py`` (no Optuna study): the
file's first config is measured first (as the baseline is), then 9 random
ones, then the rule picks among every config not yet measured. Scored like
``search_quality.py`` (``autotune.simulate.score``). The plain rule
(``thompson``) scores as it does through the loop (pnpoly 0.30, convolution
0.48 at 50 evaluations, 50 repeats), so the variants can be compared with it.

Variants: ``thompson`` (the strategy of ``--sampler linear``), ``tau=X``
(the posterior's spread scaled by X: less or more exploration), ``ei`` and
``lcb=K`` (expected improvement, lower confidence bound on the posterior),
``no-pairs`` (no pair terms), ``drop-failures`` (a failed config is left out
of the fit instead of counting as the slowest seen), ``trust-region`` (the
draw's choice kept near the best config, see :func:`within_trust_region`),
``neighbour=K`` (every K-th choice a neighbour of the best config), ``late=K``
(the last K choices of ``--trials`` take the posterior mean's best: no
exploration once the budget's end is near).

Examples::

    python benchmarks/linear_variants.py --space pnpoly --variants thompson tau=0.5 ei --repeats 40
    python benchmarks/linear_variants.py --space convolution --variants no-pairs --repeats 50 --trials 50
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune import linear  # noqa: E402
from autotune.recorded import load_recorded  # noqa: E402
from autotune.simulate import Repeat, summary  # noqa: E402
from autotune.surrogate import Knob  # noqa: E402

SPACES = {"convolution": ROOT.parent / "shared" / "recorded" / "convolution_A100.json.gz",
          "dedispersion": ROOT.parent / "shared" / "recorded" / "dedispersion_MI250X.json.gz",
          "pnpoly": ROOT.parent / "shared" / "recorded" / "pnpoly_RTX_3090.json.gz",
          "chmm": ROOT / "benchmarks" / "recorded" / "chmm_cpu_tiny.json.gz"}


def listed(path: Path) -> tuple[object, np.ndarray, np.ndarray, list[Knob]]:
    """The recorded space, every config's features (positions in [0, 1]; -1 inactive) and time (NaN: failed)."""
    recorded = load_recorded(path)
    params = [p for p in recorded.order if len(recorded.space.parameters[p].choices) > 1]
    positions, knobs = {}, []
    for name in params:
        choices = recorded.space.parameters[name].choices
        numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices)
        ordered = sorted(choices) if numeric else list(choices)
        positions[name] = {str(c): i / max(1, len(ordered) - 1) for i, c in enumerate(ordered)}
        knobs.append(Knob(len(choices), numeric))
    features, times = [], []
    for entry in recorded.entries.values():
        active = recorded.space.active(entry)
        features.append([positions[p][str(entry[p])] if active.get(p, True) and entry.get(p) is not None else -1.0
                         for p in params])
        loss = recorded.loss_of(entry)  # the time, or 1/rate where the file's objective is maximised
        times.append(np.nan if loss is None else loss)
    return recorded, np.array(features), np.array(times), knobs


def moments(seen: np.ndarray, targets: np.ndarray, candidates: np.ndarray,
            knobs: list[Knob]) -> tuple[np.ndarray, np.ndarray]:
    """The posterior mean and deviation of the candidates' standardised log times (the linear model's kernel)."""
    d = len(knobs)
    scale = linear.scales(d)
    seen_values, seen_trends = linear._encode(seen, knobs)
    values, trends = linear._encode(candidates, knobs)
    gram = linear.kernel(scale, seen_values, seen_trends, seen_values, seen_trends) + linear.NOISE * np.eye(len(targets))
    cross = linear.kernel(scale, values, trends, seen_values, seen_trends)
    # The prior variance of a config: every knob matches itself, as does every pair; trends their squares.
    prior = scale["values"] * d + scale["pairs"] * d * (d - 1) / 2 + sum(scale["trends"] * (t * t).sum(1) for t in trends)
    variance = prior - (cross * np.linalg.solve(gram, cross.T).T).sum(1)
    return cross @ np.linalg.solve(gram, targets), np.sqrt(np.maximum(variance, 1e-12))


def choose(features, times, knobs, measured: list[int], rng, variant: str, trials: int) -> int:
    fresh = np.setdiff1d(np.arange(len(times)), measured)
    seen_times = times[measured]
    ok = ~np.isnan(seen_times)
    if len(measured) < linear.STARTUP or ok.sum() < 2:
        return int(rng.choice(fresh))
    rows = np.array(measured)
    if variant == "drop-failures":
        rows, logs = rows[ok], np.log(seen_times[ok])
    else:
        worst = np.log(seen_times[ok]).max()
        logs = np.where(ok, np.log(np.where(ok, seen_times, 1.0)), worst)
    if variant == "ei" or variant.startswith("lcb="):
        targets = linear._capped(logs)
        mean, deviation = moments(features[rows], targets, features[fresh], knobs)
        if variant == "ei":
            from scipy.stats import norm

            z = (targets.min() - mean) / deviation
            return int(fresh[np.argmax((targets.min() - mean) * norm.cdf(z) + deviation * norm.pdf(z))])
        return int(fresh[np.argmin(mean - float(variant.split("=")[1]) * deviation)])
    incumbent = features[rows[ok][np.argmin(seen_times[ok])]]
    if variant.startswith("neighbour=") and (len(measured) - linear.STARTUP) % int(variant.split("=")[1]) == 0:
        # One knob of the best config moved to the adjacent value in the file's order (simpler than the loop's
        # move after a repeat, space.neighbour, which works on configs and sometimes moves two knobs).
        steps = np.array([1 / max(1, (k.levels or 2) - 1) for k in knobs])
        distance = np.abs(features[fresh] - incumbent)
        moved = distance > 1e-9
        adjacent = np.all(~moved | (np.abs(distance - steps) < 1e-6), 1)
        near = fresh[(moved.sum(1) == 1) & adjacent]
        if len(near):
            return int(rng.choice(near))
    if variant == "trust-region":
        fresh = within_trust_region(features, times, knobs, measured, fresh, incumbent)
    spread = float(variant.split("=")[1]) if variant.startswith("tau=") else 1.0
    if variant.startswith("late=") and trials - len(measured) <= int(variant.split("=")[1]):
        spread = 0.0  # the budget's last choices: the posterior mean's best, no exploration
    pairs_prior = 0.0 if variant == "no-pairs" else linear.PAIRS
    draw = linear.thompson_draw(features[rows], logs, features[fresh], knobs, rng, spread, pairs_prior)
    return int(fresh[np.argmin(draw)])


def within_trust_region(features, times, knobs, measured: list[int], fresh: np.ndarray, incumbent) -> np.ndarray:
    """The unmeasured configs that differ from the best in at most L knobs (CASMOPOLITAN's Hamming trust region,
    Wan et al. 2021): L starts at half the knobs, grows by one after 2 new bests in a row, shrinks by one after 3
    choices in a row that found none, and is the whole space again once it would reach 0."""
    d = len(knobs)
    size, wins, losses, best = max(1, (d + 1) // 2), 0, 0, np.nanmin(times[measured[:linear.STARTUP]])
    for index in measured[linear.STARTUP:]:
        better = not np.isnan(times[index]) and not times[index] >= best
        best = min(best, times[index]) if better else best
        wins, losses = (wins + 1, 0) if better else (0, losses + 1)
        if wins >= 2:
            size, wins = min(d, size + 1), 0
        if losses >= 3:
            size, losses = (size - 1 if size > 1 else d), 0
    region = fresh[(features[fresh] != incumbent).sum(1) <= size]
    return region if len(region) else fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--space", choices=sorted(SPACES), default="pnpoly")
    parser.add_argument("--variants", nargs="+", default=["thompson"])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--trials", type=int, default=50)
    args = parser.parse_args()
    recorded, features, times, knobs = listed(SPACES[args.space])
    budgets = [m for m in (20, 50, 100) if m <= args.trials]
    for variant in args.variants:
        started, repeats = time.perf_counter(), []
        for seed in range(args.repeats):
            rng, measured = np.random.default_rng(seed), [0]
            while len(measured) < args.trials:
                measured.append(choose(features, times, knobs, measured, rng, variant, args.trials))
            found = np.fmin.accumulate(times[measured])
            # Back from the loss to the file's units (1/loss where the objective is a maximised rate).
            best_so_far = [None if np.isnan(v) else float(1 / v if recorded.maximized else v) for v in found]
            repeats.append(Repeat(seed, len(measured), best_so_far))
        scores = summary(recorded, repeats, tuple(budgets))  # scored as search_quality.py scores (b(M) once per budget)
        figures = "  ".join(f"at {m}: {scores[str(m)]['mean']:.2f} ± {scores[str(m)]['std']:.2f}" for m in budgets)
        print(f"{args.space} {variant}: {figures}  ({args.repeats} repeats, {time.perf_counter() - started:.0f} s)",
              flush=True)


if __name__ == "__main__":
    main()
