"""Seconds per CHMM EM iteration: the published numba code, the seed's baseline, and a tuned config.

Three contenders, timed side by side in one run (interleaved rounds, medians):

* ``numba reference``: a straightforward numba implementation of the published
  cloned-HMM algorithm, written here as the original code does it (per-step
  forward, backward and updateC loops over NumPy arrays, a contiguous copy of
  each block and ``np.dot``), in float32, the published default dtype;
* ``baseline``: the CHMM workload under its space's baseline (the seed's torch port);
* ``tuned``: the workload under the config a search exported
  (``studies/chmm/cpu-small.json`` by default, or ``--config FILE`` or ``--set k=v``).

Every contender computes the log2 likelihood of the same sequence under the
same transitions; they are printed side by side with their relative
differences from the numba reference.

Examples::

    python benchmarks/chmm_em.py --sizes small full
    python benchmarks/chmm_em.py --sizes full --skip-baseline --set messages=numba --set dtype=float32
    python3 benchmarks/chmm_em.py --device cuda --sizes full --skip-numba --skip-baseline --config h100-small.json

On a GPU, ``--skip-numba`` leaves out the numba reference (it runs on that
machine's CPU, not this one's); its figures on the development CPU are in the
README, and the log2 likelihoods are printed for comparing by hand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.devices import cpu_threads  # noqa: E402
from autotune.space import load_space  # noqa: E402
from workloads.chmm import PSEUDOCOUNT, ChmmWorkload, initial_transitions, random_walk  # noqa: E402


def published_numba():
    """The published algorithm, as its authors wrote it for numba (float32 by default)."""
    import numba as nb

    @nb.njit
    def forward(T_tr, Pi, n_clones, x, a, mess_fwd):
        state_loc = np.hstack((np.array([0], dtype=n_clones.dtype), n_clones)).cumsum()
        mess_loc = np.hstack((np.array([0], dtype=n_clones.dtype), n_clones[x])).cumsum()
        log2_lik = np.zeros(len(x), dtype=T_tr.dtype)
        t = 0
        j = x[t]
        j_start, j_stop = state_loc[j : j + 2]
        message = Pi[j_start:j_stop].copy()
        p_obs = message.sum()
        message /= p_obs
        log2_lik[0] = np.log2(p_obs)
        mess_fwd[mess_loc[0] : mess_loc[1]] = message
        for t in range(1, x.shape[0]):
            aij, i, j = a[t - 1], x[t - 1], x[t]
            i_start, i_stop = state_loc[i : i + 2]
            j_start, j_stop = state_loc[j : j + 2]
            message = np.ascontiguousarray(T_tr[aij, j_start:j_stop, i_start:i_stop]).dot(message)
            p_obs = message.sum()
            message /= p_obs
            log2_lik[t] = np.log2(p_obs)
            mess_fwd[mess_loc[t] : mess_loc[t + 1]] = message
        return log2_lik

    @nb.njit
    def backward(T, n_clones, x, a, mess_bwd):
        state_loc = np.hstack((np.array([0], dtype=n_clones.dtype), n_clones)).cumsum()
        mess_loc = np.hstack((np.array([0], dtype=n_clones.dtype), n_clones[x])).cumsum()
        t = x.shape[0] - 1
        i = x[t]
        message = np.ones(n_clones[i], T.dtype) / n_clones[i]
        message /= message.sum()
        mess_bwd[mess_loc[t] : mess_loc[t + 1]] = message
        for t in range(x.shape[0] - 2, -1, -1):
            aij, i, j = a[t], x[t], x[t + 1]
            i_start, i_stop = state_loc[i : i + 2]
            j_start, j_stop = state_loc[j : j + 2]
            message = np.ascontiguousarray(T[aij, i_start:i_stop, j_start:j_stop]).dot(message)
            p_obs = message.sum()
            message /= p_obs
            mess_bwd[mess_loc[t] : mess_loc[t + 1]] = message

    @nb.njit
    def update_c(C, T, n_clones, mess_fwd, mess_bwd, x, a):
        state_loc = np.hstack((np.array([0], dtype=n_clones.dtype), n_clones)).cumsum()
        mess_loc = np.hstack((np.array([0], dtype=n_clones.dtype), n_clones[x])).cumsum()
        C[:] = 0
        for t in range(1, len(x)):
            aij, i, j = a[t - 1], x[t - 1], x[t]
            tm1_start, tm1_stop = mess_loc[t - 1 : t + 1]
            t_start, t_stop = mess_loc[t : t + 2]
            i_start, i_stop = state_loc[i : i + 2]
            j_start, j_stop = state_loc[j : j + 2]
            q = (
                mess_fwd[tm1_start:tm1_stop].reshape(-1, 1)
                * T[aij, i_start:i_stop, j_start:j_stop]
                * mess_bwd[t_start:t_stop].reshape(1, -1)
            )
            q /= q.sum()
            C[aij, i_start:i_stop, j_start:j_stop] += q

    def em_iteration(T, T_tr, Pi, n_clones, x, a, buffers):
        mess_fwd, mess_bwd, C = buffers
        log2_lik = forward(T_tr, Pi, n_clones, x, a, mess_fwd)
        backward(T, n_clones, x, a, mess_bwd)
        update_c(C, T, n_clones, mess_fwd, mess_bwd, x, a)
        T_new = C + PSEUDOCOUNT
        T_new /= T_new.sum(2, keepdims=True)
        return float(log2_lik.sum()), C, T_new

    return em_iteration


def tuned_config(args, space):
    if args.set:
        return space.parse_assignments(args.set, space.defaults)
    path = Path(args.config)
    if not path.is_file():
        sys.exit(f"no exported config at {path}: run `autotune search --workload chmm --device cpu` first, "
                 "or pass --config FILE or --set name=value")
    return space.allowed(json.loads(path.read_text())["config"], str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["small", "full"], choices=list(ChmmWorkload.sizes))
    parser.add_argument("--config", default="studies/chmm/cpu-small.json", help="exported config to time as 'tuned'")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="tuned config from the defaults instead")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (medians are reported)")
    parser.add_argument("--skip-baseline", action="store_true", help="do not time the baseline (slow at full size)")
    parser.add_argument("--skip-numba", action="store_true", help="do not time the numba reference (on a GPU machine)")
    parser.add_argument("--device", default="cpu", help="torch device of the workload's contenders (cpu, cuda)")
    args = parser.parse_args()

    torch.set_num_threads(cpu_threads())
    space = load_space("chmm")
    tuned = tuned_config(args, space)
    em_reference = published_numba()
    print(f"machine: {cpu_threads()} CPU threads, torch {torch.__version__}; numba reference single-threaded as published")
    if args.device != "cpu":
        print(f"workload contenders on {args.device}: {torch.cuda.get_device_name()}, CUDA {torch.version.cuda}")
    print(f"tuned config: {tuned.describe()}\n")
    rows = []
    for size in args.sizes:
        workload = ChmmWorkload(size, args.device)
        p = workload.params
        _, x, a = random_walk(p["rows"], p["cols"], p["n_obs"], p["steps"], p["seed"])
        n_clones = np.full(p["n_obs"], p["clones"], dtype=np.int64)
        T = initial_transitions(n_clones, p["seed"]).astype(np.float32)
        T_tr = np.ascontiguousarray(T.transpose(0, 2, 1))
        n_states = int(n_clones.sum())
        Pi = np.full(n_states, 1.0 / n_states, dtype=np.float32)
        total = int(n_clones[x].sum())
        buffers = (np.empty(total, np.float32), np.empty(total, np.float32), np.empty_like(T))

        def run_reference(args=(T, T_tr, Pi, n_clones, x, a, buffers)) -> float:
            return em_reference(*args)[0]

        contenders = {} if args.skip_numba else {"numba reference": run_reference}
        # float() of the likelihood waits for the device: every timing below includes all the work.
        if not args.skip_baseline:
            run_baseline = workload.build(space.baseline)
            contenders["baseline"] = lambda run=run_baseline: float(run()["log2_likelihood"])
        run_tuned = workload.build(tuned)
        contenders["tuned"] = lambda run=run_tuned: float(run()["log2_likelihood"])

        times: dict[str, list[float]] = {name: [] for name in contenders}
        likelihoods: dict[str, float] = {}
        for name, run in contenders.items():  # warm-up: numba compiles, caches fill
            start = time.perf_counter()
            likelihoods[name] = run()
            print(f"{size}: {name} first run {time.perf_counter() - start:.2f} s", flush=True)
        for _ in range(args.rounds):
            for name, run in contenders.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
        # Ratios and differences are against the numba reference, or the baseline where it is skipped.
        yardstick = next((name for name in ("numba reference", "baseline") if name in contenders), None)
        for name in contenders:
            seconds = statistics.median(times[name])
            speedup = diff = None
            if yardstick is not None:
                speedup = statistics.median(times[yardstick]) / seconds
                diff = abs(likelihoods[name] - likelihoods[yardstick]) / abs(likelihoods[yardstick])
            rows.append((size, name, seconds, p["steps"] / seconds, speedup, likelihoods[name], diff))

    against = f"vs {yardstick.split()[0]}" if yardstick else ""
    print(f"\n{'size':<6} {'contender':<16} {'s/iteration':>12} {'timesteps/s':>12} {against:>12} "
          f"{'log2 likelihood':>18} {'rel. diff':>10}")
    for size, name, seconds, rate, speedup, lik, diff in rows:
        ratio = f"{speedup:>11.2f}x" if speedup is not None else f"{'-':>12}"
        print(f"{size:<6} {name:<16} {seconds:>12.3f} {rate:>12,.0f} {ratio} {lik:>18.4f} "
              + (f"{diff:>10.1e}" if diff is not None else f"{'-':>10}"))


if __name__ == "__main__":
    main()
