"""Planted bugs of the CHMM EM step. It draws nothing at random, so it has no sampling bug."""

from __future__ import annotations

import numpy as np
import torch

from tests.mutants import Mutant, leaking, patched, poisoned, scaled
from workloads import chmm
from workloads.chmm import ChmmWorkload, _Kernels

WORKLOAD = "chmm"


def _last_transition_dropped(update_counts):
    def counts(T, layout, fwd, bwd, norms, *args, **kwargs):
        C = update_counts(T, layout, fwd, bwd, norms, *args, **kwargs)
        # Take the last step's expected counts back out: the loop's range stopped one short.
        s, t = layout.steps - 2, layout.steps - 1
        alpha = fwd[layout.mstarts[s]:layout.mstops[s]]
        beta = bwd[layout.mstarts[t]:layout.mstops[t]]
        block = (layout.actions[s], slice(layout.starts[s], layout.stops[s]), slice(layout.starts[t], layout.stops[t]))
        q = torch.outer(alpha, beta) * T[block]
        C[block] -= q / q.sum()
        return C

    return counts


def _transposed_forward(forward):
    # The forward pass given T where it wants T transposed: a layout slip.
    return lambda self, T_tr: forward(self, T_tr.transpose(1, 2).contiguous())


def _backward_one_step_late(backward):
    def shifted(self, T):
        messages = backward(self, T)
        clones = int(self.layout.n_clones[0])
        return torch.roll(messages, clones)

    return shifted


def _actions_off_by_one(data):
    def shifted(self):
        x, a = data(self)
        return x, np.roll(a, 1)

    return shifted


def _last_normaliser_lost(forward):
    def lost(self, T_tr):
        messages, norms = forward(self, T_tr)
        norms = norms.clone()
        norms[-1] = 1
        return messages, norms

    return lost


MUTANTS = [
    Mutant("last transition dropped from the counts", "skipped step",
           patched(chmm, "update_counts", _last_transition_dropped),
           missed_in={"bfloat16 at small": "one transition of 10,000 moves the counts by 0.0024 of their norm, under "
                                           "bfloat16's own error there (0.0054)"}),
    Mutant("last step's normaliser lost", "skipped step", patched(_Kernels, "forward", _last_normaliser_lost)),
    Mutant("no pseudocount in the M step", "missing term",
           patched(chmm, "update_transitions", lambda f: lambda counts, pseudocount=0.0: f(counts, 0.0))),
    Mutant("counts scaled by 1.05", "wrong scale", scaled(chmm, "update_counts", 1.05)),
    Mutant("forward pass with T untransposed", "data path", patched(_Kernels, "forward", _transposed_forward)),
    Mutant("backward messages one step late", "data path", patched(_Kernels, "backward", _backward_one_step_late)),
    Mutant("actions off by one", "data path", patched(ChmmWorkload, "_data", _actions_off_by_one)),
    Mutant("counts kept in 8 bits", "precision leak", leaking(chmm, "update_counts")),
    Mutant("NaN in the counts", "nan", poisoned(chmm, "update_counts")),
]
