"""The linear strategy (``--sampler linear``): a Bayesian linear model of log run time over each knob's values,
their trends and every pair of knobs, and Thompson sampling over the whole space.

What makes a kernel fast is mostly a few knobs' values and a few pairs of
them ("tile 20 with method 0", "shared memory without padding"), and the best
value of a numeric knob often lies at the end of its range. The model's
terms say exactly that:

- each knob's value (one weight per value, "inactive" being one more value);
- each numeric knob's trend (its position in the sorted values, and its
  square), so that a trend seen in a few values is extended to the others;
- each pair of knobs (one weight per pair of values).

The weights have a Gaussian prior, so with few configs measured most of them
stay uncertain. The next config is the best one of the whole space under one
draw of the weights from their posterior (Thompson sampling): an uncertain
term is as likely to be drawn helpful as harmful, so untried values keep
being tried while the terms the measurements agree on steer the draw.

Measured on the recorded spaces through autotune's loop over 50 repeats
(benchmarks/search_quality.md, "Fifty repeats: the linear model against TPE"), it scored as TPE did
at 50 evaluations on the three GPU spaces (0.46 against 0.45), better at 100
(0.72 against 0.60), and far better on our own conditional space, chmm at
tiny (0.92 against 0.13 at 50); but a real search of chmm with it took half
as long again as with TPE for the same best config, so alone it is a choice,
not the default. The default, ``tpe-linear``, hands it the trials after TPE's
first 30 configs (autotune.samplers.HAND_OVER).
"""

from __future__ import annotations

import itertools

import numpy as np

from autotune.surrogate import Knob, ModelSampler

__all__ = ["LinearSampler", "kernel", "scales", "thompson_draw"]

#: Configs measured (the baseline and defaults among them) before the model chooses; the rest are random.
STARTUP = 10
#: Prior variance of each group of terms (of log time, standardised), shared among the group's knobs or pairs.
VALUES, TRENDS, PAIRS = 1.0, 1.0, 0.5
#: The share of (standardised) log time the model leaves unexplained. 0.05, 0.2, 0.5 and 1.0 scored 0.40,
#: 0.61, 0.42 and 0.48 at 50 evaluations on the recorded GPU spaces, in a scratch replay with the baseline
#: first (10 repeats); near 0 the first, very slow configs rule the draws.
NOISE = 0.2
#: Candidates scored at once: bounds the memory of a draw over a large space.
CHUNK = 8192


def _encode(features: np.ndarray, knobs: list[Knob]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each knob's values (a knob with choices: each config's value index, its "inactive" value last, standing for
    one-hot columns; a range: its position, its square and inactive, as columns) and each numeric knob's trend
    columns (centred position and its square; 0 where inactive).

    Indices, not one-hot columns: the model's sums over one-hot columns are lookups and comparisons of indices,
    the same numbers to the last bit in half the time (a draw over 4,092 configs with 100 measured: 26 ms
    against 55 ms on the 2-core CPU; 20 replays of pnpoly: 30 s against 45-55 s, the same output)."""
    values, trends = [], []
    for column, knob in zip(features.T, knobs):
        inactive = column < 0
        centred = np.where(inactive, 0.0, column - 0.5)
        if knob.levels is None:
            values.append(np.stack([centred, centred**2, inactive], 1).astype(float))
            continue
        values.append(np.where(inactive, knob.levels, np.rint(np.maximum(column, 0) * (knob.levels - 1))).astype(int))
        if knob.numeric and knob.levels > 2:
            trends.append(np.stack([centred, centred**2], 1))
    return values, trends


def _width(knob: Knob) -> int:
    """How many value terms a knob has: one per choice and "inactive", or a range's three columns."""
    return 3 if knob.levels is None else knob.levels + 1


def _times(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The value terms times ``weights`` (one row per term): a row lookup for indices."""
    return weights[values] if values.ndim == 1 else values @ weights


def _capped(values: np.ndarray) -> np.ndarray:
    """Log times with the slow half cut to the median, standardised: the model's terms go to telling fast
    configs apart, not to explaining how slow the slowest are (the baseline is often far slower than all)."""
    values = np.minimum(values, np.median(values))
    spread = values.std()
    return (values - values.mean()) / (spread if spread > 0 else 1.0)


def scales(d: int, pairs: float = PAIRS) -> dict[str, float]:
    """Each term's prior variance among ``d`` knobs: a group's variance shared among its knobs or pairs."""
    return {"values": VALUES / d, "trends": TRENDS / d, "pairs": pairs / max(d * (d - 1) / 2, 1)}


def kernel(scale: dict[str, float], values: list[np.ndarray], trends: list[np.ndarray], seen_values: list[np.ndarray],
           seen_trends: list[np.ndarray]) -> np.ndarray:
    """The prior covariance of configs (encoded by :func:`_encode`) with the seen ones: the terms' dot products."""
    # Per knob, whether the two configs share the value (a range: the dot product of its columns): summed, and
    # its squares summed. Knob by knob, in place: the arrays are candidates x seen configs.
    shape = (len(values[0]) if values else 0, len(seen_values[0]) if seen_values else 0)
    if all(v.ndim == 1 for v in values):  # knobs with choices only (every recorded space): count the matches
        count = np.zeros(shape, np.uint16)
        for v, s in zip(values, seen_values):
            count += v[:, None] == s[None, :]
        first = second = count.astype(float)  # 0 and 1 are their own squares
    else:
        first, second = np.zeros(shape), np.zeros(shape)
        for v, s in zip(values, seen_values):
            same = (v[:, None] == s[None, :]).astype(float) if v.ndim == 1 else v @ s.T
            first += same
            second += same * same
    out = scale["values"] * first + scale["pairs"] * (first * first - second) / 2
    for t, s in zip(trends, seen_trends):
        out = out + scale["trends"] * (t @ s.T)
    return out


def thompson_draw(measured: np.ndarray, log_seconds: np.ndarray, candidates: np.ndarray, knobs: list[Knob],
                  rng: np.random.Generator, spread: float = 1.0, pairs_prior: float = PAIRS) -> np.ndarray:
    """One draw of every candidate's standardised log time from the model's posterior given the measured configs.

    Matheron's rule: a draw from the prior, moved by the posterior's
    correction at the measured configs. The prior draw needs the weights of
    the terms; the correction needs only the kernel (the terms' dot
    products), so the pair terms are never listed. ``spread`` scales the
    draw's deviation from the posterior mean, and ``pairs_prior`` is the pair
    terms' prior variance (``benchmarks/linear_variants.py`` tries others).
    """
    scale = scales(len(knobs), pairs_prior)
    targets = _capped(log_seconds)
    seen_values, seen_trends = _encode(measured, knobs)
    # The prior's weights: one draw, shared by the measured configs and every candidate.
    value_w = [spread * rng.standard_normal(_width(k)) for k in knobs]
    trend_w = [spread * rng.standard_normal(t.shape[1]) for t in seen_trends]
    pairs = list(itertools.combinations(range(len(seen_values)), 2))
    pair_w = [spread * rng.standard_normal((_width(knobs[a]), _width(knobs[b]))) for a, b in pairs]

    def prior(values: list[np.ndarray], trends: list[np.ndarray]) -> np.ndarray:
        out = np.zeros(len(values[0]) if values else 0)
        for v, w in zip(values, value_w):
            out += np.sqrt(scale["values"]) * _times(v, w)
        for t, w in zip(trends, trend_w):
            out += np.sqrt(scale["trends"]) * (t @ w)
        for (a, b), w in zip(pairs, pair_w):
            rows, other = _times(values[a], w), values[b]  # knob a's row of the pair's weights, then knob b's
            out += np.sqrt(scale["pairs"]) * (rows[np.arange(len(other)), other] if other.ndim == 1
                                              else (rows * other).sum(1))
        return out

    noise = spread * rng.standard_normal(len(targets)) * np.sqrt(NOISE)
    gram = kernel(scale, seen_values, seen_trends, seen_values, seen_trends) + NOISE * np.eye(len(targets))
    weights = np.linalg.solve(gram, targets - prior(seen_values, seen_trends) - noise)
    draws = []
    for start in range(0, len(candidates), CHUNK):
        values, trends = _encode(candidates[start:start + CHUNK], knobs)
        draws.append(prior(values, trends) + kernel(scale, values, trends, seen_values, seen_trends) @ weights)
    return np.concatenate(draws) if draws else np.zeros(0)


class LinearSampler(ModelSampler):
    """Optuna sampler of the linear strategy over ``space`` (see the module's docstring)."""

    STARTUP = STARTUP

    def choose(self, measured: np.ndarray, log_seconds: np.ndarray, candidates: np.ndarray) -> int:
        return int(np.argmin(thompson_draw(measured, log_seconds, candidates, self.knobs, self.rng)))
