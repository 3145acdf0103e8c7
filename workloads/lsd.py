"""LSD: real-time latent-diffusion denoising of a video stream with a U-Net.

A miniature of the project in seed 002, after its ``GPUIntensiveLSD`` sketch:
a U-Net denoiser (residual blocks of group norm, SiLU and 3x3 convolutions, a
sinusoidal timestep embedding added in every block, self-attention at the
16x16 and 8x8 levels, skip connections) over 4-channel 64x64 latents. A
stream of frames (generated latents of moving shapes) is denoised the way
real-time img2img pipelines do it: each frame is noised to a fixed strength
and brought back with a few deterministic DDIM steps. One run is ``frames``
frames through ``steps`` steps each; the output is the denoised latents.

The seed's "before" is a plain fp32 model in NCHW with hand-written attention
(``softmax(q k^T / sqrt(d)) v``) under ``no_grad``, one frame at a time. Its
fixes and its next targets are knobs: ``precision`` (fp16/bf16 autocast, or the
seed's direct ``model.to(dtype)`` conversion), ``channels_last``,
``attention`` (SDPA, or one of its backends), ``grad_mode``, ``batch_size``
(frames per forward), ``cuda_graph`` (capture the denoising step once and
replay it; CUDA only), ``compile``, ``cudnn_benchmark`` and ``tf32``.

The check compares the output latents with those of the fp32 eager
reference, by relative error with a tolerance per precision: a NaN, a wrong
backend or a wrong memory layout moves the latents past it.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autotune.check import Check, relative_error
from autotune.config import Config
from autotune.workload import Workload, register_workload
from workloads._torch import attention_backend, maybe_compile

__all__ = ["TOLERANCES", "DenoisingUNet", "LsdWorkload", "ddim_timesteps", "make_frames"]

#: precision knob -> (dtype, direct conversion): autocast keeps fp32 weights and casts per op.
PRECISIONS: Mapping[str, tuple[torch.dtype, bool]] = {
    "fp32": (torch.float32, False),
    "amp_fp16": (torch.float16, False),
    "amp_bf16": (torch.bfloat16, False),
    "fp16": (torch.float16, True),
    "bf16": (torch.bfloat16, True),
}

#: Relative tolerances on the output latents, by the arithmetic's mantissa,
#: each a stated multiple of the honest worst over every knob value and 3 data
#: seeds (`python benchmarks/check_power.py --workloads lsd`): fp32 2.2e-7 at
#: `tiny`, 5e-7 at `small` (summation order only), bound 4x the latter; fp16
#: 3.9e-4 (4e-4 at `small`), bound 3.8x; bf16 3.1e-3 (3.3e-3 at `small`), bound
#: 2.1x, tight because 8-bit noise predictions move them 1.1e-2. TF32 keeps
#: fp16's 10 bits (not measured here: no GPU).
TOLERANCES: Mapping[str, float] = {"fp32": 2e-6, "tf32": 3e-3, "fp16": 1.5e-3, "bf16": 7e-3}

#: U-Net levels from this index down get self-attention (16x16 and 8x8 for 64x64 latents, as in the seed).
ATTENTION_FROM_LEVEL = 2


# -- data and sampler ----------------------------------------------------------------------------


def make_frames(count: int, channels: int, size: int, seed: int) -> np.ndarray:
    """A latent video: smooth blobs drifting across the frame, with a little texture (count, C, size, size)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    blobs = [(rng.random(2), (rng.random(2) - 0.5) * 0.05, 0.05 + 0.15 * rng.random(), rng.normal(0, 1, channels))
             for _ in range(6)]
    texture = rng.normal(0, 0.1, size=(channels, size, size)).astype(np.float32)
    frames = np.empty((count, channels, size, size), dtype=np.float32)
    for f in range(count):
        frame = texture.copy()
        for centre, velocity, radius, colour in blobs:
            cx, cy = (centre + velocity * f) % 1.0
            bump = np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * radius**2))
            frame += colour[:, None, None].astype(np.float32) * bump
        frames[f] = frame
    return frames


def alphas_cumprod(train_steps: int = 1000) -> torch.Tensor:
    """Stable Diffusion's scaled-linear noise schedule, as cumulative products of ``1 - beta``."""
    betas = torch.linspace(0.00085**0.5, 0.012**0.5, train_steps, dtype=torch.float64) ** 2
    return torch.cumprod(1 - betas, dim=0)


def ddim_timesteps(strength: float, steps: int, train_steps: int = 1000) -> list[int]:
    """The img2img schedule: start at ``strength`` of the way to pure noise, ``steps`` evenly spaced steps down."""
    start = int(strength * (train_steps - 1))
    return [round(start - i * start / steps) for i in range(steps)]


# -- the U-Net -----------------------------------------------------------------------------------


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


def _norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(min(32, channels // 4), channels)


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, temb: int) -> None:
        super().__init__()
        self.norm1, self.conv1 = _norm(cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb, cout)
        self.norm2, self.conv2 = _norm(cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(emb)[:, :, None, None].to(h.dtype)
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class SelfAttention(nn.Module):
    """Spatial self-attention over the H*W positions, heads of 64 channels (the seed's optimal head_dim).

    Projections are linear layers over the positions as tokens, as in diffusers'
    attention processors: q, k and v come out with unit stride in the head
    dimension, which every fused SDPA kernel needs.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.heads = max(1, channels // 64)
        self.norm = _norm(channels)
        self.qkv = nn.Linear(channels, 3 * channels)
        self.proj = nn.Linear(channels, channels)
        self.mode = "manual"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        tokens = self.norm(x).flatten(2).transpose(1, 2)  # (B, HW, C)
        q, k, v = self.qkv(tokens).view(B, H * W, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        if self.mode == "manual":
            # The seed's "before": the attention matrix made explicitly.
            weights = torch.softmax(q @ k.transpose(-1, -2) * (q.shape[-1] ** -0.5), dim=-1)
            y = weights @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v)
        y = self.proj(y.transpose(1, 2).reshape(B, H * W, C))
        return x + y.transpose(1, 2).reshape(B, C, H, W)


class DenoisingUNet(nn.Module):
    """Predicts the noise in latents ``x`` at timestep ``t``: 3 down levels, a middle, 3 up levels with skips."""

    def __init__(self, latent_channels: int, base: int, mult: tuple[int, ...] = (1, 2, 2), blocks: int = 1) -> None:
        super().__init__()
        temb = 4 * base
        self.base = base
        self.time_mlp = nn.Sequential(nn.Linear(base, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.conv_in = nn.Conv2d(latent_channels, base, 3, padding=1)
        channels = [base * m for m in mult]

        def level(cin: int, c: int, attend: bool) -> nn.ModuleList:
            # ``blocks`` residual blocks, each followed by attention at the low-resolution levels.
            layers = []
            for i in range(blocks):
                layers += [ResBlock(cin if i == 0 else c, c, temb), SelfAttention(c) if attend else nn.Identity()]
            return nn.ModuleList(layers)

        self.down = nn.ModuleList()
        self.downsample = nn.ModuleList()
        cin = base
        for index, c in enumerate(channels):
            # Attention from the third level down (16x16 and below for 64x64 latents) and in the middle.
            self.down.append(level(cin, c, index >= ATTENTION_FROM_LEVEL))
            self.downsample.append(nn.Conv2d(c, c, 3, stride=2, padding=1))
            cin = c
        self.mid1, self.mid_attn, self.mid2 = ResBlock(cin, cin, temb), SelfAttention(cin), ResBlock(cin, cin, temb)
        self.up = nn.ModuleList()
        for index, c in reversed(list(enumerate(channels))):
            self.up.append(level(cin + c, c, index >= ATTENTION_FROM_LEVEL))
            cin = c
        self.norm_out = _norm(cin)
        self.conv_out = nn.Conv2d(cin, latent_channels, 3, padding=1)

    def set_attention(self, mode: str) -> None:
        for module in self.modules():
            if isinstance(module, SelfAttention):
                module.mode = mode

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        emb = self.time_mlp(timestep_embedding(t, self.base).to(x.dtype))
        h = self.conv_in(x)
        skips = []
        for layers, down in zip(self.down, self.downsample):
            h = _run_level(layers, h, emb)
            skips.append(h)
            h = down(h)
        h = self.mid2(self.mid_attn(self.mid1(h, emb)), emb)
        for layers in self.up:
            h = F.interpolate(h, scale_factor=2.0, mode="nearest")
            h = _run_level(layers, torch.cat([h, skips.pop()], dim=1), emb)
        return self.conv_out(F.silu(self.norm_out(h)))


def _run_level(layers: nn.ModuleList, h: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
    for block, attention in zip(layers[::2], layers[1::2]):
        h = attention(block(h, emb))
    return h


# -- the workload -------------------------------------------------------------------------------


@register_workload
class LsdWorkload(Workload):
    """Denoising a stream of 64x64 latent frames with a few DDIM steps each (unit: frames)."""

    name = "lsd"
    unit = "frames"
    version = 2  # 2: `full` is the seed's 860M-parameter model
    sizes = {
        "tiny": {"frames": 4, "steps": 2, "latent_channels": 4, "latent_size": 16, "base": 8, "mult": (1, 2, 2),
                 "blocks": 1, "strength": 0.5, "seed": 2},
        "small": {"frames": 16, "steps": 2, "latent_channels": 4, "latent_size": 64, "base": 32, "mult": (1, 2, 2),
                  "blocks": 1, "strength": 0.5, "seed": 0},
        # The seed's production model, GPUIntensiveLSD(base_channels=192) with "880M params": base 192, channel
        # multipliers 1-2-4-8 and 5 residual blocks a level give 860M, over 64x64 latents, a second of 30 fps
        # video. A GPU size: on a 2-core CPU one run takes minutes.
        "full": {"frames": 32, "steps": 4, "latent_channels": 4, "latent_size": 64, "base": 192, "mult": (1, 2, 4, 8),
                 "blocks": 5, "strength": 0.5, "seed": 0},
    }

    def frames(self) -> torch.Tensor:
        p = self.params
        return torch.from_numpy(make_frames(p["frames"], p["latent_channels"], p["latent_size"], p["seed"]))

    def model(self) -> DenoisingUNet:
        p = self.params
        torch.manual_seed(p["seed"])
        return DenoisingUNet(p["latent_channels"], p["base"], tuple(p["mult"]), p["blocks"])

    def build(self, config: Config) -> Callable[[], torch.Tensor]:
        p = self.params
        device = torch.device(self.device)
        if device.type == "cuda":
            if config["tf32"] and os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
                # The driver then keeps TF32 off whatever torch asks: tf32=True would be measured as fp32.
                raise RuntimeError("tf32=True cannot be measured: NVIDIA_TF32_OVERRIDE=0 is set, and under it cuBLAS "
                                   "and cuDNN run fp32 whatever torch asks; unset it to tune tf32")
            # Process-wide switches; each trial runs in a fresh process.
            torch.backends.cudnn.benchmark = bool(config["cudnn_benchmark"])
            torch.backends.cuda.matmul.allow_tf32 = bool(config["tf32"])
            torch.backends.cudnn.allow_tf32 = bool(config["tf32"])  # on by default in PyTorch: fp32 means fp32 here
        dtype, direct = PRECISIONS[config["precision"]]
        memory_format = torch.channels_last if config["channels_last"] else torch.contiguous_format
        model = self.model().eval()
        model.set_attention("manual" if config["attention"] == "manual" else "sdpa")
        model = model.to(device=device, memory_format=memory_format)
        if direct:
            model = model.to(dtype)
        input_dtype = dtype if direct else torch.float32
        use_autocast = dtype != torch.float32 and not direct
        denoise: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = maybe_compile(model, config["compile"])
        # ``manual`` is the seed's own attention: no SDPA backend to choose.
        backend = "sdpa" if config["attention"] == "manual" else config["attention"]
        grad_mode = torch.inference_mode if config["grad_mode"] == "inference_mode" else torch.no_grad

        frames = self.frames()  # the stream arrives in host memory, as from a decoder or camera
        noise = torch.randn(frames.shape, generator=torch.Generator().manual_seed(p["seed"] + 1))
        batch = config["batch_size"]
        if batch > p["frames"] or p["frames"] % batch:
            # Never clamped: a config runs as named or not at all.
            raise ValueError(f"batch_size {batch} does not divide the {p['frames']} frames of size {self.size!r}: "
                             f"choose a divisor of {p['frames']}")
        a_bar = alphas_cumprod()
        timesteps = ddim_timesteps(p["strength"], p["steps"])
        coefficients = [(float(a_bar[t].sqrt()), float((1 - a_bar[t]).sqrt())) for t in timesteps]

        def eps_eager(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            with attention_backend(backend), torch.autocast(device.type, dtype=dtype, enabled=use_autocast):
                return denoise(x.to(input_dtype).contiguous(memory_format=memory_format), t)

        predict = eps_eager
        if config["cuda_graph"]:
            predict = _graphed(eps_eager, (batch, p["latent_channels"], p["latent_size"], p["latent_size"]), device,
                               grad_mode)

        def denoise_stream() -> torch.Tensor:
            outputs = []
            with grad_mode():
                for start in range(0, p["frames"], batch):
                    clean = frames[start:start + batch].to(device, non_blocking=True)
                    x = coefficients[0][0] * clean + coefficients[0][1] * noise[start:start + batch].to(device)
                    for i, t in enumerate(timesteps):
                        sqrt_a, sqrt_1ma = coefficients[i]
                        eps = predict(x, torch.full((batch,), float(t), device=device)).float()
                        x0 = (x - sqrt_1ma * eps) / sqrt_a
                        if i + 1 < len(timesteps):  # DDIM (eta 0): step to the next timestep
                            next_a, next_1ma = coefficients[i + 1]
                            x = next_a * x0 + next_1ma * eps
                    outputs.append(x0)
            return torch.cat(outputs)

        return denoise_stream

    def items_per_run(self, config: Config) -> int:
        return int(self.params["frames"])

    def to_reference(self, output: torch.Tensor) -> torch.Tensor:
        return output.detach().cpu().double()

    def check(self, output: torch.Tensor, reference: torch.Tensor, config: Config) -> Check:
        key = "fp32" if config["precision"] == "fp32" else config["precision"].removeprefix("amp_")
        if key == "fp32" and config["tf32"]:
            key = "tf32"
        return Check.from_metrics({"latents": (relative_error(output, reference), TOLERANCES[key])})


def _graphed(eps: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], shape: tuple[int, ...], device: torch.device,
             grad_mode: Callable[[], Any]) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``eps`` captured once as a CUDA graph over static input buffers, replayed for every step (seed week 2)."""
    static_x = torch.zeros(shape, device=device)
    static_t = torch.zeros(shape[0], device=device)
    with grad_mode():
        # Warm-up on a side stream, as capture requires (lazy initialisation, cuDNN autotuning).
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                eps(static_x, static_t)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = eps(static_x, static_t)

    def replay(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        static_x.copy_(x)
        static_t.copy_(t)
        graph.replay()
        return static_out.clone()

    # The graph reads the model's weights by address and holds no reference to them: without this one, nothing
    # does once build returns, the caching allocator hands their memory to the run's own tensors, and every
    # replay computes with those: the wrong output of relative error 0.29-0.34 measured on an H100 and an H200
    # (benchmarks/lsd_graph_race.py: any wrapper of the replay that kept ``eps`` in a closure made it right).
    replay.captured = eps  # type: ignore[attr-defined]
    return replay
