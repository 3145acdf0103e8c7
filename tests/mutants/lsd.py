"""Planted bugs of the LSD denoising stream."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.mutants import Mutant, attention, leaking, patched, poisoned
from workloads import lsd
from workloads.lsd import DenoisingUNet, LsdWorkload, ResBlock

WORKLOAD = "lsd"


def _without_timestep(forward):
    # The residual block's timestep term left out (a fused kernel that forgot it).
    return lambda self, x, emb: self.skip(x) + self.conv2(F.silu(self.norm2(self.conv1(F.silu(self.norm1(x))))))


def _noise_from_the_global_stream(randn):
    return lambda *args, generator=None, **kwargs: randn(*args, **kwargs)


MUTANTS = [
    Mutant("last DDIM step skipped", "skipped step", patched(lsd, "ddim_timesteps", lambda f: lambda *a, **k: f(*a, **k)[:-1])),
    Mutant("timestep embedding left out of the residual blocks", "missing term", patched(ResBlock, "forward", _without_timestep)),
    Mutant("attention scaled by 1/d", "wrong scale", attention(scale=lambda q, scale: 1.0 / q.shape[-1]), {"attention": "sdpa"}),
    Mutant("group norm over one group", "wrong scale",
           patched(F, "group_norm", lambda f: lambda x, groups, *a, **k: f(x, 1, *a, **k))),
    Mutant("noise from another random stream", "sampling", patched(torch, "randn", _noise_from_the_global_stream)),
    Mutant("frames off by one", "data path", patched(LsdWorkload, "frames", lambda f: lambda self: torch.roll(f(self), 1, 0))),
    Mutant("noise prediction kept in 8 bits", "precision leak", leaking(DenoisingUNet, "forward")),
    Mutant("NaN in the noise prediction", "nan", poisoned(DenoisingUNet, "forward")),
]
