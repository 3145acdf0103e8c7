"""The CHMM workload against a plain, obviously-correct NumPy version of the published algorithm."""

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from autotune.space import load_space
from workloads.chmm import (
    TOLERANCES,
    ChmmWorkload,
    em_step,
    initial_transitions,
    log2_likelihood,
    random_walk,
)


def numpy_em_step(T, n_clones, x, a, pseudocount):
    """Forward, backward and updateC exactly as the published cloned-HMM code, in float64."""
    state_loc = np.concatenate([[0], np.cumsum(n_clones)])
    n_states = state_loc[-1]
    steps = len(x)

    def block(t):
        return state_loc[x[t]], state_loc[x[t] + 1]

    fwd = []
    log2_lik = np.zeros(steps)
    j0, j1 = block(0)
    message = np.ones(j1 - j0) / n_states
    p = message.sum()
    fwd.append(message / p)
    log2_lik[0] = np.log2(p)
    for t in range(1, steps):
        (i0, i1), (j0, j1) = block(t - 1), block(t)
        message = T[a[t - 1], i0:i1, j0:j1].T @ fwd[-1]
        p = message.sum()
        fwd.append(message / p)
        log2_lik[t] = np.log2(p)
    bwd = [None] * steps
    i0, i1 = block(steps - 1)
    bwd[-1] = np.ones(i1 - i0) / (i1 - i0)
    for t in range(steps - 2, -1, -1):
        (i0, i1), (j0, j1) = block(t), block(t + 1)
        message = T[a[t], i0:i1, j0:j1] @ bwd[t + 1]
        bwd[t] = message / message.sum()
    C = np.zeros_like(T)
    for t in range(1, steps):
        (i0, i1), (j0, j1) = block(t - 1), block(t)
        q = fwd[t - 1][:, None] * T[a[t - 1], i0:i1, j0:j1] * bwd[t][None, :]
        C[a[t - 1], i0:i1, j0:j1] += q / q.sum()
    T_new = C + pseudocount
    T_new /= T_new.sum(2, keepdims=True)
    return log2_lik.sum(), C, T_new


@pytest.fixture(scope="module")
def tiny():
    workload = ChmmWorkload("tiny")
    p = workload.params
    _, x, a = random_walk(p["rows"], p["cols"], p["n_obs"], p["steps"], p["seed"])
    n_clones = np.full(p["n_obs"], p["clones"])
    T = initial_transitions(n_clones, p["seed"])
    return workload, T, n_clones, x, a


@pytest.fixture(scope="module")
def space():
    return load_space("chmm")


@pytest.fixture(scope="module")
def reference(tiny, space):
    workload = tiny[0]
    config = space.reference
    return workload.to_reference(workload.build(config)())


def test_reference_config_matches_plain_numpy(tiny, reference):
    _, T, n_clones, x, a = tiny
    lik, C, _ = numpy_em_step(T, n_clones, x, a, 2e-3)
    assert float(reference["log2_likelihood"]) == pytest.approx(lik, rel=1e-12)
    np.testing.assert_allclose(reference["counts"].numpy(), C, rtol=1e-10, atol=1e-12)
    assert C.sum() == pytest.approx(len(x) - 1)  # one unit of expected count per transition


def test_public_api_matches_plain_numpy(tiny):
    _, T, n_clones, x, a = tiny
    lik, C, T_new = numpy_em_step(T, n_clones, x, a, 2e-3)
    assert log2_likelihood(T, n_clones, x, a) == pytest.approx(lik, rel=1e-12)
    assert log2_likelihood(torch.as_tensor(T), n_clones, x, a) == pytest.approx(lik, rel=1e-12)
    em_lik, em_C, em_T = em_step(T, n_clones, x, a, update="grouped")
    assert em_lik == pytest.approx(lik, rel=1e-12)
    np.testing.assert_allclose(em_C.numpy(), C, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(em_T.numpy(), T_new, rtol=1e-9, atol=1e-12)


UPDATES = ["loop", "loop_outer", "grouped", "batched"]
LOOP_KERNELS = [
    {"messages": "loop", "indices": indices, "workspace": workspace, "update_c": update_c}
    for indices, workspace, update_c in itertools.product(["per_step", "precomputed", "block_views"], [False, True], UPDATES)
]
OTHER_KERNELS = [{"messages": "numba", "overlap_passes": o, "update_c": u} for o in (False, True) for u in UPDATES] + [
    {"messages": scan, "chunk_size": chunk, "update_c": u}
    for scan in ("scan", "chained") for chunk in (8, 13, 1000) for u in UPDATES
]


def _needs(kernel):
    marks = []
    if kernel["messages"] == "numba":
        marks.append(pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="needs numba"))
    return pytest.param(kernel, marks=marks, id="-".join(str(v) for v in kernel.values()))


KERNELS = [_needs(k) for k in LOOP_KERNELS + OTHER_KERNELS]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_kernel_agrees_with_the_reference(tiny, space, reference, dtype, kernel):
    workload = tiny[0]
    config = space.validate({"dtype": dtype, "debug_asserts": True, **kernel})
    run = workload.build(config)
    first = workload.check(run(), reference, config)
    again = workload.check(run(), reference, config)  # reused buffers must give the same answer
    assert first.passed and again.passed, (first, again)
    assert first.metrics["log2_likelihood"][1] == TOLERANCES[dtype]["log2_likelihood"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_is_judged_by_its_own_tolerance(tiny, space, reference, dtype):
    workload = tiny[0]
    config = space.defaults.replace(dtype=dtype)
    check = workload.check(workload.build(config)(), reference, config)
    assert check.passed, check
    assert {name: tol for name, (_, tol) in check.metrics.items()} == TOLERANCES[dtype]
    assert 0 < check.metrics["counts"][0]  # half precision is never exact
    # and not loose: the honest error is a sizeable fraction of its bound (see TOLERANCES)
    assert check.metrics["counts"][0] > check.metrics["counts"][1] / 20


def test_em_never_decreases_the_likelihood(tiny):
    _, T, n_clones, x, a = tiny
    liks = []
    for _ in range(6):
        lik, _, T = em_step(T, n_clones, x, a)
        liks.append(lik)
    assert all(b >= a_ - 1e-9 * abs(a_) for a_, b in zip(liks, liks[1:])), liks
    assert liks[-1] > liks[0]


@pytest.fixture(scope="module")
def long_sequence():
    class Long(ChmmWorkload):
        sizes = {"tiny": {**ChmmWorkload.sizes["tiny"], "steps": 4000}}

    workload = Long("tiny")
    config = load_space("chmm").validate(dict(load_space("chmm").reference, update_c="grouped"))
    return workload, workload.to_reference(workload.build(config)())


@pytest.mark.parametrize(
    "kernel",
    [_needs({"messages": "loop"}), _needs({"messages": "numba"}),
     _needs({"messages": "scan", "chunk_size": 4096}), _needs({"messages": "scan", "chunk_size": 64}),
     _needs({"messages": "chained", "chunk_size": 4096}), _needs({"messages": "chained", "chunk_size": 64})],
)
def test_long_sequence_would_underflow_without_normalisation(long_sequence, kernel):
    # 4,000 steps: the unnormalised forward product is about 2^-16000, far below
    # float32's smallest number (2^-149); a scan chunk of 4,000 products would
    # underflow too without its carried log-scale. Every kernel keeps its precision.
    workload, reference = long_sequence
    assert float(reference["log2_likelihood"]) < -8000
    config = load_space("chmm").validate({"dtype": "float32", "update_c": "grouped", **kernel})
    check = workload.check(workload.build(config)(), reference, config)
    assert check.passed, check


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_lost_step_fails_the_check_at_any_length(long_sequence, dtype):
    # Judged by the norm of all steps, one step's error shrinks with the square root of their number: at 4,000
    # steps the last step's normaliser, lost, passed in bfloat16 at 0.87 of the bound (0.0174 against 0.02), and
    # at `small`'s 10,000 too. The worst step sees it in full at any length: 0.93 of the largest step.
    from tests.mutants.chmm import MUTANTS

    workload, reference = long_sequence
    config = load_space("chmm").defaults.replace(dtype=dtype)
    honest = workload.check(workload.build(config)(), reference, config)
    assert honest.passed, honest
    with next(m for m in MUTANTS if m.name == "last step's normaliser lost").plant():
        check = workload.check(workload.build(config)(), reference, config)
    error, tolerance = check.metrics["step_log2_likelihoods"]
    assert error > 10 * tolerance, check


def test_float16_total_overflows_on_a_long_sequence_and_fails_the_check():
    # A float16 total of the log2 likelihood cannot pass -65504: the check must catch it.
    class Long(ChmmWorkload):
        sizes = {"tiny": {**ChmmWorkload.sizes["tiny"], "clones": 1, "steps": 20_000}}

    workload = Long("tiny")
    space = load_space("chmm")
    reference = workload.to_reference(workload.build(space.validate(dict(space.reference, update_c="grouped")))())
    assert float(reference["log2_likelihood"]) < -65504
    config = space.defaults.replace(dtype="float16")
    check = workload.check(workload.build(config)(), reference, config)
    assert not check.passed and check.metric == "log2_likelihood" and check.error == float("inf")


@pytest.mark.parametrize("messages", ["loop", "scan", "chained"])
def test_debug_assertions_catch_a_broken_model(tiny, space, messages):
    workload = tiny[0]
    config = space.defaults.replace(debug_asserts=True, dtype="float64", workspace=False, messages=messages)
    run = workload.build(config)
    # Zero the transitions out of every clone: the next observation becomes impossible.
    for cell in run.__closure__:
        value = cell.cell_contents
        if isinstance(value, torch.Tensor) and value.dim() == 3:
            value.zero_()
    with pytest.raises(AssertionError):
        run()


def test_numba_refuses_what_it_cannot_run(tiny, space):
    pytest.importorskip("numba")
    with pytest.raises(ValueError, match="float32 or float64 only"):
        tiny[0].build(space.defaults.replace(messages="numba", dtype="float16"))


def test_a_cached_walk_that_cannot_be_read_is_made_again_and_a_refused_write_leaves_no_file(tmp_path):
    # A truncated walk.npz failed every trial and the reference with "BadZipFile: File is not a zip file",
    # naming no file, until someone deleted it; a full disk left each trial's half-written temporary file.
    from workloads._torch import cached

    path = tmp_path / "walk.npz"
    path.write_bytes(b"PK\x03\x04 cut short")

    def save(value, tmp):
        np.savez(tmp, x=value)

    def load(where):
        with np.load(where) as data:
            return data["x"]

    with pytest.warns(UserWarning, match=r"walk.npz could not be read \(BadZipFile: .*\); made again"):
        assert cached(path, lambda: np.arange(3), save, load).tolist() == [0, 1, 2]
    assert load(path).tolist() == [0, 1, 2]  # whole again

    def full(value, tmp):
        Path(tmp).write_bytes(b"PK")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        cached(tmp_path / "other.npz", lambda: np.arange(3), full, load)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["walk.npz"]


def test_numba_under_numba_disable_jit_fails_rather_than_run_in_the_interpreter(tiny, space, monkeypatch):
    # NUMBA_DISABLE_JIT=1 ran the kernels as Python: 32x slower at tiny, checked "ok", ranked below torch's.
    numba = pytest.importorskip("numba")
    monkeypatch.setattr(numba.config, "DISABLE_JIT", 1)
    with pytest.raises(RuntimeError, match="messages=numba cannot be measured: NUMBA_DISABLE_JIT=1 is set"):
        tiny[0].build(space.defaults.replace(messages="numba", dtype="float32"))


@pytest.mark.parametrize("messages", ["scan", "chained"])
def test_scan_chunks_are_chained_exactly(messages):
    # The scan's messages and normalisers equal the step-by-step recursion's, whatever the chunk.
    from workloads.chmm import _Kernels, _Layout

    _, x, a = random_walk(5, 5, 6, 300, seed=3)
    n_clones = np.full(6, 3)
    T = torch.as_tensor(initial_transitions(n_clones, 3))
    layout = _Layout(n_clones, x, a)
    loop = _Kernels(layout, "cpu", torch.float64)
    fwd, norms = loop.forward(T.transpose(1, 2).contiguous())
    bwd = loop.backward(T)
    for chunk in (1, 2, 7, 299, 300, 1024):
        scan = _Kernels(layout, "cpu", torch.float64, messages=messages, chunk_size=chunk)
        s_fwd, s_norms = scan.forward(T.transpose(1, 2).contiguous())
        torch.testing.assert_close(s_fwd, fwd, rtol=1e-10, atol=1e-13)
        torch.testing.assert_close(s_norms, norms, rtol=1e-10, atol=1e-13)
        torch.testing.assert_close(scan.backward(T), bwd, rtol=1e-10, atol=1e-13)


#: Slips in the chained kernel's three passes (its source, mutated), each with the chunk size that exercises it.
CHAINED_SLIPS = [
    ("chunk products multiplied in the wrong order",
     "tree = tree[:, 1::2] @ tree[:, 0::2]", "tree = tree[:, 0::2] @ tree[:, 1::2]", 8),
    ("an odd chunk's last step left out of its product",
     "tree = torch.cat([tree, eye.expand(tree.shape[0], 1, clones, clones)], 1)", "tree = tree[:, :-1]", 13),
    ("every chunk starts from the first message", "current[j + 1] = ahead / ahead.sum()", "current[j + 1] = current[0]", 8),
    ("a chunk chained through the previous chunk's product",
     "ahead = products[j] @ current[j]", "ahead = products[max(j - 1, 0)] @ current[j]", 8),
    ("each step's normaliser taken from the step before", "log_norms[1:] = torch.log(sums.double()).view(-1)",
     "log_norms[1:] = torch.log(sums.double()).roll(1, 1).view(-1)", 8),
]


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("slip, old, new, chunk", CHAINED_SLIPS, ids=[s[0] for s in CHAINED_SLIPS])
def test_the_check_catches_a_slip_in_the_chained_kernel(tiny, space, reference, monkeypatch, slip, old, new, chunk,
                                                        dtype):
    # Measured at tiny: caught at 1.6x its bound or more in bfloat16, 7.7x in float16, 1.5e4x in float32.
    import inspect
    import textwrap

    from workloads import chmm

    source = textwrap.dedent(inspect.getsource(chmm._chained))
    assert source.count(old) == 1, f"the kernel no longer reads {old!r}: update this slip"
    namespace = dict(vars(chmm))
    exec(compile(source.replace(old, new), chmm.__file__, "exec"), namespace)
    workload = tiny[0]
    config = space.validate({"messages": "chained", "chunk_size": chunk, "dtype": dtype, "update_c": "grouped"})
    assert workload.check(workload.build(config)(), reference, config).passed  # the kernel as written
    monkeypatch.setitem(chmm._SCANS, "chained", namespace["_chained"])
    check = workload.check(workload.build(config)(), reference, config)
    assert not check.passed, (slip, check)

def test_batched_counts_match_grouped_across_many_batches(tiny, monkeypatch):
    # At tiny every group fits one batch: 256 entries a batch splits its 114 groups into 8 batches of 2-32.
    from workloads import chmm
    from workloads.chmm import _Kernels, _Layout, update_counts

    _, T, n_clones, x, a = tiny
    monkeypatch.setattr(chmm, "_BATCH", 256)
    layout = _Layout(n_clones, x, a)
    grouping = chmm._Grouping(layout, "cpu", batched=True)
    assert len(grouping.batches) > 4 and sum(len(batch[0]) for batch in grouping.batches) == len(grouping.groups)
    T = torch.as_tensor(T)
    loop = _Kernels(layout, "cpu", torch.float64)
    fwd, norms = loop.forward(T.transpose(1, 2).contiguous())
    bwd = loop.backward(T)
    grouped = update_counts(T, layout, fwd, bwd, norms, "grouped")
    torch.testing.assert_close(update_counts(T, layout, fwd, bwd, norms, "batched", grouping), grouped,
                               rtol=1e-12, atol=1e-15)


def test_batched_counts_need_uniform_clones():
    from workloads.chmm import _Grouping, _Layout

    layout = _Layout(np.array([2, 3]), np.array([0, 1, 0, 1]), np.zeros(4, dtype=np.int64))
    with pytest.raises(ValueError, match="same number of clones"):
        _Grouping(layout, "cpu", batched=True)


#: Slips in the batched count update (the source of ``update_counts`` or ``_Grouping``, mutated).
BATCHED_SLIPS = [
    ("padded steps counted", "update_counts", "scale = (weights[ts] * mask).unsqueeze(2)",
     "scale = weights[ts].unsqueeze(2)"),
    ("the forward message of step t, not t - 1", "update_counts",
     "A.index_select(0, prev.reshape(-1))", "A.index_select(0, ts.reshape(-1))"),
    ("each group scaled by its transposed block", "update_counts",
     "= blocks[actions, rows, :, cols, :] *", "= blocks[actions, cols, :, rows, :] *"),
    ("a group skipped between batches", "_Grouping", "start = stop\n", "start = stop + 1\n"),
]


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("slip, target, old, new", BATCHED_SLIPS, ids=[s[0] for s in BATCHED_SLIPS])
def test_the_check_catches_a_slip_in_the_batched_count_update(tiny, space, reference, monkeypatch, slip, target, old,
                                                               new, dtype):
    # Measured at tiny, 256 entries a batch: caught at 22.7x its bound or more in bfloat16, 114x in float16,
    # 2.3e5x in float32; the code as written errs by at most 0.38 of a bound (bfloat16).
    import inspect
    import textwrap

    from workloads import chmm

    monkeypatch.setattr(chmm, "_BATCH", 256)  # several batches at tiny
    source = textwrap.dedent(inspect.getsource(getattr(chmm, target)))
    assert source.count(old) == 1, f"the code no longer reads {old!r}: update this slip"
    namespace = dict(vars(chmm))
    exec(compile(source.replace(old, new), chmm.__file__, "exec"), namespace)
    workload = tiny[0]
    config = space.validate({"messages": "loop", "dtype": dtype, "update_c": "batched"})
    assert workload.check(workload.build(config)(), reference, config).passed  # the code as written
    monkeypatch.setattr(chmm, target, namespace[target])
    check = workload.check(workload.build(config)(), reference, config)
    assert not check.passed, (slip, check)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kernel", [_needs(k) for k in LOOP_KERNELS + OTHER_KERNELS if k["messages"] != "numba"])
def test_every_kernel_on_cuda(tiny, space, reference, kernel):
    workload = ChmmWorkload("tiny", device="cuda")
    config = space.validate({"dtype": "float32", "debug_asserts": False, **kernel})
    output = workload.build(config)()
    assert output["counts"].device.type == "cuda"
    assert workload.check(output, reference, config).passed
