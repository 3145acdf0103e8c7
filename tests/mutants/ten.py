"""Planted bugs of the TEN training step. It draws nothing at random, so it has no sampling bug."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from tests.mutants import Mutant, adamw, every_nth_skipped, leaking, no_clipping, patched, poisoned, step_skipped
from workloads.ten import TenBlock, TenCell, TenLM, TenWorkload

WORKLOAD = "ten"


def _without_resonance(segment):
    # The fused output written as if resonance were the identity (its gradient stays defined, all zero).
    def segment_without(self, x, sr, si):
        saved = self._parameters["resonance"]
        self._parameters["resonance"] = torch.eye(saved.shape[0], dtype=saved.dtype) + 0 * saved
        try:
            return segment(self, x, sr, si)
        finally:
            self._parameters["resonance"] = saved

    return segment_without


def _mean_not_sum(cross_entropy):
    # The loss averaged per micro-batch and then again over the global batch.
    return lambda *args, **kwargs: cross_entropy(*args, **{**kwargs, "reduction": "mean"})


MUTANTS = [
    Mutant("last micro-batch's backward skipped", "skipped step", every_nth_skipped(torch.Tensor, "backward", 2),
           {"batch_size": 4}),
    Mutant("fused output without the resonance matrix", "missing term", patched(TenCell, "_segment", _without_resonance),
           {"fused_output": True}),
    Mutant("a block's recurrence left out", "missing term",
           patched(TenBlock, "forward", lambda f: lambda self, x: x + self.mlp(self.norm2(x)) + 0 * self.cell(self.norm1(x)))),
    Mutant("loss averaged twice", "wrong scale", patched(F, "cross_entropy", _mean_not_sum)),
    Mutant("learning rate halved", "optimizer", adamw(lr=lambda lr: lr / 2)),
    Mutant("no weight decay", "optimizer", adamw(weight_decay=0.0)),
    Mutant("no gradient clipping", "optimizer", lambda: no_clipping()),
    Mutant("optimizer step skipped", "optimizer", lambda: step_skipped()),
    Mutant("tokens off by one", "data path",
           patched(TenWorkload, "_tokens", lambda f: lambda self: np.roll(f(self), 1, axis=1))),
    Mutant("recurrence output kept in 8 bits", "precision leak", leaking(TenCell, "_segment")),
    Mutant("NaN in the logits", "nan", poisoned(TenLM, "forward")),
]
