"""What a training-step workload returns and checks: the whole step, not only its loss.

A config that skips, rescales or alters the optimizer step can leave the loss
untouched (AdamW divides each gradient by its own RMS, so even a gradient off
by a constant factor moves the weights almost as before). The step is
therefore checked on what it produces: the loss, the gradients, the norm that
clipping saw and the norm it left, the optimizer's hyper-parameters, and the
weight update itself.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import torch

from autotune.check import relative_error
from autotune.config import Config

__all__ = ["hyperparameters", "micro_batch", "step_metrics", "update"]

#: The optimizer's hyper-parameters are read back from its param_groups: any
#: config runs the same optimizer, so they agree to the last bit.
HYPER_TOLERANCE = 1e-12

#: Clipping acted in a step when the clipped norm is below this fraction of the gradient norm; when it did
#: not, the two are the same norm and differ by rounding alone (about 1e-7).
CLIPPED_BELOW = 0.999


def micro_batch(config: Config, batch: int, what: str) -> int:
    """The micro-batch a config asks for, refused when it cannot run as named.

    A micro-batch larger than the batch, or one that does not divide it,
    would run as something else under its name; that trial must fail, not lie.
    """
    micro = int(config["batch_size"])
    if micro > batch or batch % micro:
        raise ValueError(f"batch_size {micro} does not divide the {what} of {batch}: "
                         f"choose a divisor of {batch}")
    return micro


def hyperparameters(optimizer: torch.optim.Optimizer) -> torch.Tensor:
    """lr, weight decay, betas and eps of every param group, as one float64 vector."""
    rows = []
    for group in optimizer.param_groups:
        beta1, beta2 = group.get("betas", (0.0, 0.0))
        rows.append([float(group["lr"]), float(group.get("weight_decay", 0.0)), float(beta1), float(beta2),
                     float(group.get("eps", 0.0))])
    return torch.tensor(rows, dtype=torch.float64)


def update(params: Sequence[torch.Tensor], initial: Iterable[torch.Tensor]) -> torch.Tensor:
    """Final minus initial weights, flattened: what the step did to the model."""
    with torch.no_grad():
        return torch.cat([(q - q0).reshape(-1) for q, q0 in zip(params, initial)])


def grad_norm(params: Sequence[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of every gradient together (after clipping, the norm the optimizer steps with)."""
    with torch.no_grad():
        return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(q.grad.float()) for q in params]))


def step_metrics(output: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor],
                 tolerances: Mapping[str, float],
                 norms: tuple[str, str] = ("grad_norm", "clipped_norm")) -> dict[str, tuple[float, float]]:
    """``{name: (relative error, tolerance)}`` for every output named in ``tolerances``, plus the hyper-parameters.

    ``norms`` names the gradient norm and the clipped norm. Where clipping acted
    in every step of the reference, the clipped norm is the clipping threshold,
    computed in fp32 whatever the precision, and keeps its own tight bound (it
    catches a step that skips clipping). Where it did not act, the clipped norm
    is the gradient norm itself, with that norm's error and bound: ten at
    `small` (gradient norm 0.26, threshold 1.0) otherwise rejected every fp16
    and bf16 config, whose clipped norm was off by 3e-5 and 1.4e-3 against 2e-6.
    """
    metrics = {name: (relative_error(output[name], reference[name]), tol) for name, tol in tolerances.items()}
    grad, clipped = norms
    if clipped in metrics and not bool((reference[clipped] < reference[grad] * CLIPPED_BELOW).all()):
        metrics[clipped] = (metrics[clipped][0], max(tolerances[clipped], tolerances[grad]))
    metrics["hyperparameters"] = (relative_error(output["hyperparameters"], reference["hyperparameters"]),
                                  HYPER_TOLERANCE)
    return metrics
