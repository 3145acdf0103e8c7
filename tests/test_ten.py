"""The TEN workload: every recurrence kernel against a plain complex-number loop, every knob against the reference."""

import itertools

import pytest
import torch

from autotune.control import control
from autotune.space import load_space
from workloads import ten
from workloads.ten import TOLERANCES, TenWorkload, markov_sequences


def complex_recurrence(beta, log_m, phase, h0):
    """``h_t = m e^{i phi} h_{t-1} + beta_t`` with torch's complex numbers, one step at a time."""
    lam = torch.polar(log_m.exp(), phase)
    h, states = h0, []
    for t in range(beta.shape[1]):
        h = lam * h + beta[:, t]
        states.append(h)
    return torch.stack(states, dim=1)


@pytest.fixture(scope="module")
def recurrence_case():
    g = torch.Generator().manual_seed(0)
    B, T, K = 3, 37, 5
    beta = torch.randn(B, T, K, generator=g, dtype=torch.float64)
    log_m = torch.log(torch.rand(K, generator=g, dtype=torch.float64) * 0.2 + 0.79)
    phase = torch.rand(K, generator=g, dtype=torch.float64) * 3
    h0 = torch.complex(torch.randn(B, K, generator=g, dtype=torch.float64), torch.randn(B, K, generator=g, dtype=torch.float64))
    return beta, log_m, phase, h0, complex_recurrence(beta, log_m, phase, h0)


class _Cell:
    def __init__(self, log_m, phase):
        self._log_m, self.phase = log_m, phase

    def log_magnitude(self):
        return self._log_m


@pytest.mark.parametrize("kernel", ["chunked", "scan"])
@pytest.mark.parametrize("chunk", [1, 4, 7, 37, 64])
def test_vectorised_kernels_equal_the_complex_recurrence(recurrence_case, kernel, chunk):
    beta, log_m, phase, h0, expected = recurrence_case
    fn = ten._scan if kernel == "scan" else ten._chunked
    states, last_real, last_imag = fn(_Cell(log_m, phase), beta, h0.real.clone(), h0.imag.clone(), chunk)
    torch.testing.assert_close(states, expected.real, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(last_real, expected.real[:, -1], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(last_imag, expected.imag[:, -1], rtol=1e-10, atol=1e-10)


def test_markov_sequences_are_seeded_and_in_range():
    a, b = markov_sequences(50, 4, 30, seed=1), markov_sequences(50, 4, 30, seed=1)
    assert (a == b).all() and a.min() >= 0 and a.max() < 50
    # A sparse chain: far fewer distinct successors than a uniform one would show.
    pairs = {(int(x), int(y)) for row in markov_sequences(50, 64, 200, seed=1) for x, y in zip(row, row[1:])}
    assert len(pairs) < 50 * 15


@pytest.fixture(scope="module")
def space():
    return load_space("ten")


@pytest.fixture(scope="module")
def tiny(space):
    workload = TenWorkload("tiny")
    reference = workload.to_reference(workload.build(space.reference)())
    return workload, reference


LOOPS = [{"recurrence": "loop", "loop_step": s, "input_proj": p} for s, p in itertools.product(["plain", "fused", "inplace"], ["per_step", "batched"])]
SCANS = [{"recurrence": r, "chunk_size": c} for r, c in itertools.product(["chunked", "scan"], [4, 7, 256])]
SHAPES = [{"fused_output": f, "checkpoint_chunk": c, "batch_size": b} for f, c, b in [(False, 0, 4), (True, 64, 1), (True, 0, 2), (False, 1024, 8)]]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(str(v) for v in s.values()))
@pytest.mark.parametrize("kernel", LOOPS + SCANS, ids=lambda k: "-".join(str(v) for v in k.values()))
def test_every_knob_agrees_with_the_reference(tiny, space, kernel, shape):
    workload, reference = tiny
    config = space.validate({**kernel, **shape, "precision": "fp32"})
    run = workload.build(config)
    first = workload.check(run(), reference, config)
    again = workload.check(run(), reference, config)  # every run starts from the same weights
    assert first.passed and again.passed, (first, again)


def test_small_checkpoint_segments_with_a_short_sequence(space):
    # Segments shorter than the sequence carry the state across checkpoints.
    class Long(TenWorkload):
        sizes = {"tiny": {**TenWorkload.sizes["tiny"], "seq_len": 150}}

    workload = Long("tiny")
    reference = workload.to_reference(workload.build(space.reference)())
    for kernel in ({"recurrence": "scan", "chunk_size": 16}, {"recurrence": "loop", "loop_step": "fused"}):
        config = space.validate({**kernel, "checkpoint_chunk": 64})
        assert workload.check(workload.build(config)(), reference, config).passed


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_half_precision_is_judged_by_its_own_tolerance(tiny, space, precision):
    workload, reference = tiny
    config = space.defaults.replace(precision=precision)
    check = workload.check(workload.build(config)(), reference, config)
    assert check.passed, check
    assert check.metrics["loss"][1] == TOLERANCES[precision]["loss"]
    assert check.metrics["grads"][0] > 0  # half precision is never exact


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_half_precision_passes_where_clipping_does_not_act(space, precision):
    """At `small` the gradient norm (0.26) is below the threshold (1.0): the clipped norm is the gradient norm,
    with its precision's error. Its fp32 bound (2e-6) rejected every fp16 and bf16 config there."""
    class Unclipped(TenWorkload):
        sizes = {"tiny": {**TenWorkload.sizes["tiny"], "max_grad_norm": 100.0}}

    workload = Unclipped("tiny")
    reference = workload.to_reference(workload.build(space.reference)())
    assert float(reference["clipped_norm"]) == pytest.approx(float(reference["grad_norm"]), rel=1e-6)
    config = space.defaults.replace(precision=precision)
    check = workload.check(workload.build(config)(), reference, config)
    assert check.passed, check
    assert check.metrics["clipped_norm"][1] == TOLERANCES[precision]["grad_norm"]


def test_a_clipped_norm_keeps_its_tight_bound_where_clipping_acted(tiny, space):
    workload, reference = tiny  # tiny's threshold (0.25) sits below its gradient norm
    config = space.defaults.replace(precision="fp16")
    check = workload.check(workload.build(config)(), reference, config)
    assert check.metrics["clipped_norm"][1] == TOLERANCES["fp16"]["clipped_norm"] == 2e-6


def test_compiled_scan_agrees_with_the_reference(tiny, space):
    workload, reference = tiny
    config = space.defaults.replace(compile="default", checkpoint_chunk=0)
    assert workload.check(workload.build(config)(), reference, config).passed


def test_a_wrong_kernel_fails_the_check(tiny, space, monkeypatch):
    # A scan that forgets the phase (a real eigenvalue m instead of m e^{i phi}):
    # the loss barely moves, the gradients do.
    workload, reference = tiny
    real_powers = ten._powers
    monkeypatch.setattr(ten, "_powers", lambda log_m, phase, n: real_powers(log_m, phase * 0, n))
    config = space.defaults.replace(recurrence="scan")
    check = workload.check(workload.build(config)(), reference, config)
    assert not check.passed and check.metric in {"grads", "grad_norm", "loss"}


def test_the_seeds_in_place_state_update_breaks_autograd():
    # The seed's memory fix, `state_real.mul_(magnitude)`, overwrites a state that
    # the previous step saved for its backward pass; autograd refuses it, which
    # is why the `inplace` step only updates fresh temporaries.
    beta = torch.randn(2, 3, requires_grad=True)
    magnitude = torch.full((3,), 0.9, requires_grad=True)
    state_real = beta * 1.0
    output = state_real * magnitude  # saves state_real for the backward pass
    state_real.mul_(magnitude)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (output.sum() + state_real.sum()).backward()


def test_training_step_lowers_the_loss(space):
    # The step is a real one: repeated from its own weights, the loss falls.
    workload = TenWorkload("tiny")
    config = space.defaults
    model = ten.TenLM(32, 16, 8, 2)
    model.set_options(recurrence="scan", loop_step="plain", input_proj="batched", chunk_size=8, fused_output=True,
                      checkpoint_chunk=0)
    tokens = torch.as_tensor(markov_sequences(32, 8, 49, seed=3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        loss = torch.nn.functional.cross_entropy(model(tokens[:, :-1]).reshape(-1, 32), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]
    assert workload.items_per_run(config) == workload.params["global_batch"] * 48


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_reduce_overhead_with_gradients_accumulated_over_micro_batches_agrees_with_the_reference():
    # latentwire's backward raised under reduce-overhead on an H100 (a gradient that was the backward graph's
    # output, overwritten by the next replay); ten accumulates the same way. workloads._torch.own_gradients.
    from autotune.devices import resolve_device

    space = load_space("ten").for_device(resolve_device("auto").profile)
    workload = TenWorkload("tiny", device="cuda")
    reference = workload.to_reference(workload.build(space.reference)())
    config = space.validate({**dict(space.defaults), "compile": "reduce-overhead", "batch_size": 2})
    run = workload.build(config)
    run()
    output = run()
    check = workload.check(output, reference, config)  # as a trial checks it: the output as the run returns it
    assert check.passed, check
    control(workload, check, output, reference, config)  # and a graph's output made wrong fails it (not yet run)
