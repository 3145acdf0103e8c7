"""Planted bugs of the LatentWire training loop."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.mutants import Mutant, adamw, attention, every_nth_skipped, leaking, no_clipping, patched, poisoned
from workloads import latentwire
from workloads.latentwire import ChatTokenizer, LatentWireModel

WORKLOAD = "latentwire"


def _targets_off_by_one(rows):
    def shifted(*args, **kwargs):
        tokens, targets = rows(*args, **kwargs)
        return tokens, torch.roll(targets, 1, dims=1)

    return shifted


def _without_system_prompt(scaffold):
    return lambda self, example: scaffold(self, example).replace(latentwire.SYSTEM_PROMPT, "")


def _order_from_the_global_stream(randperm):
    # The sample order drawn without its own generator: another stream than the reference's.
    return lambda n, *args, generator=None, **kwargs: randperm(n, *args, **kwargs)


MUTANTS = [
    Mutant("last micro-batch of each step skipped", "skipped step", every_nth_skipped(torch.Tensor, "backward", 4),
           {"batch_size": 4}),
    Mutant("causal mask dropped", "missing term", attention(is_causal=False)),
    Mutant("attention scaled by 1/d", "wrong scale", attention(scale=lambda q, scale: 1.0 / q.shape[-1])),
    Mutant("loss averaged per micro-batch", "wrong scale",
           patched(F, "cross_entropy", lambda f: lambda *a, **k: f(*a, **{**k, "reduction": "mean"}))),
    Mutant("sample order from another random stream", "sampling",
           patched(torch, "randperm", _order_from_the_global_stream)),
    Mutant("learning rate halved", "optimizer", adamw(lr=lambda lr: lr / 2)),
    Mutant("no weight decay", "optimizer", adamw(weight_decay=0.0)),
    Mutant("no gradient clipping", "optimizer", lambda: no_clipping()),
    Mutant("second optimizer step skipped", "optimizer", every_nth_skipped(torch.optim.AdamW, "step", 2)),
    Mutant("targets off by one", "data path", patched(latentwire, "_rows", _targets_off_by_one)),
    Mutant("scaffold without the system prompt", "data path", patched(ChatTokenizer, "scaffold", _without_system_prompt)),
    Mutant("logits kept in 8 bits", "precision leak", leaking(LatentWireModel, "forward")),
    Mutant("NaN in the logits", "nan", poisoned(LatentWireModel, "forward")),
]
