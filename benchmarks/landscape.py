"""The shape of a recorded space: how many local minima a search by one-knob moves can get stuck in.

For every recorded space, two neighbourhoods of a config are counted: the
**adjacent** one (one knob moved to the next value up or down) and the
**one-knob** one (one knob moved to any other value); a neighbour must be a
recorded config. A local minimum is a config that ran and that no neighbour
beats. The optimum's basin is the share of configs from which always taking
the best neighbour (steepest descent) ends at the optimum. Few local minima
and a large basin favour a local search; many, a model of the whole space.

A second table says how hard a score is to reach: how many configs score
at least 0.5, 0.7 and 0.9 at 50 evaluations (their time is at most
``b(50) - S * (b(50) - optimum)``, ``autotune.simulate``'s scoring), and
the chance that 50 configs drawn at random include one of them.

Example::

    python benchmarks/landscape.py
    python benchmarks/landscape.py --recorded ../shared/recorded/pnpoly_RTX_3090.json.gz
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.recorded import Recorded, load_recorded  # noqa: E402
from autotune.simulate import expected_random_best  # noqa: E402

DEFAULT_FILES = sorted((ROOT.parent / "shared" / "recorded").glob("*.json.gz")) + sorted(
    (ROOT / "benchmarks" / "recorded").glob("*.json.gz"))
Point = tuple


def landscape(recorded: Recorded) -> dict[str, dict]:
    """Local minima and the optimum's basin under the adjacent and the one-knob neighbourhoods."""
    values = [list(recorded.space.parameters[name].choices) for name in recorded.order]
    time: dict[Point, float] = {}
    for entry in recorded.entries.values():
        loss = recorded.loss_of(entry)  # the time, or 1/rate where the file's objective is maximised
        time[tuple(entry[name] for name in recorded.order)] = math.inf if loss is None else loss
    position = [{v: i for i, v in enumerate(vs)} for vs in values]

    def adjacent(point: Point) -> list[Point]:
        out = []
        for j, vs in enumerate(values):
            i = position[j][point[j]]
            out += [point[:j] + (vs[k],) + point[j + 1:] for k in (i - 1, i + 1) if 0 <= k < len(vs)]
        return [p for p in out if p in time]

    def one_knob(point: Point) -> list[Point]:
        out = [point[:j] + (v,) + point[j + 1:] for j, vs in enumerate(values) for v in vs if v != point[j]]
        return [p for p in out if p in time]

    ran = [p for p, t in time.items() if t < math.inf]
    optimum = min(ran, key=time.__getitem__)
    out = {}
    for name, neighbours in (("adjacent", adjacent), ("one-knob", one_knob)):
        around = {p: neighbours(p) for p in ran}
        minima = [p for p in ran if all(time[q] >= time[p] for q in around[p])]
        ends: dict[Point, Point] = {}

        def descend(point: Point, around: dict[Point, list[Point]] = around) -> Point:
            path = []
            while point not in ends:
                path.append(point)
                best = min(around[point], key=time.__getitem__, default=None)
                if best is None or time[best] >= time[point]:
                    ends[point] = point
                    break
                point = best
            for p in path:
                ends[p] = ends[point]
            return ends[point]

        basin = sum(descend(p) == optimum for p in ran)
        out[name] = {"neighbours": sum(len(v) for v in around.values()) / len(ran), "local_minima": len(minima),
                     "basin": basin / len(ran),
                     "best_minima": sorted(time[p] for p in minima)[:4]}
    return out


def reaching(recorded: Recorded, m: int = 50, scores: tuple[float, ...] = (0.5, 0.7, 0.9)) -> dict[float, dict]:
    """For each score S: the configs whose time scores at least S at M evaluations, and the chance that M random
    configs (drawn without replacement from every recorded one) include one of them."""
    b = expected_random_best(recorded, m)
    n = len(recorded.entries)
    out = {}
    for s in scores:
        bound = b - s * (b - recorded.optimum)
        k = sum(1 for t in recorded.times if not recorded.better(bound, t))
        # P(none of the k among M draws) = C(n - k, M) / C(n, M)
        miss = math.exp(_log_comb(n - k, m) - _log_comb(n, m)) if n - k >= m else 0.0
        out[s] = {"configs": k, "share": k / n, "chance": 1.0 - miss}
    return out


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recorded", nargs="+", type=Path, default=DEFAULT_FILES)
    args = parser.parse_args(argv)
    print("| recorded space | configs that ran | neighbourhood | neighbours (mean) | local minima "
          "| optimum's basin | best local minima |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for path in args.recorded:
        recorded = load_recorded(path)
        for name, f in landscape(recorded).items():
            print(f"| {path.name} | {len(recorded.times)} | {name} | {f['neighbours']:.1f} | {f['local_minima']} "
                  f"| {100 * f['basin']:.0f}% | {', '.join(f'{t:.4g}' for t in f['best_minima'])} |")
    print()
    print("| recorded space | configs | scoring 0.5 or more at 50 | 0.7 or more | 0.9 or more "
          "| chance that 50 random configs include one (0.5 / 0.7 / 0.9) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for path in args.recorded:
        recorded = load_recorded(path)
        r = reaching(recorded)
        print(f"| {path.name} | {len(recorded.entries)} | "
              + " | ".join(f"{r[s]['configs']} ({100 * r[s]['share']:.2f}%)" for s in r)
              + " | " + " / ".join(f"{r[s]['chance']:.2f}" for s in r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
