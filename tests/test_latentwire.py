"""The LatentWire workload: data, tokenizer and batches, every knob against the fp32 reference, and broken runs caught."""

import pytest
import torch

from autotune.devices import PROFILES
from autotune.space import load_space
from tests.conftest import cpu_with_bf16
from workloads import latentwire
from workloads.latentwire import TOLERANCES, ChatTokenizer, LatentWireWorkload, make_examples


@pytest.fixture(scope="module")
def space():
    return load_space("latentwire").for_device(cpu_with_bf16())


@pytest.fixture(scope="module")
def tiny(space):
    workload = LatentWireWorkload("tiny")
    reference = workload.to_reference(workload.build(space.reference)())
    return workload, reference


def test_examples_are_extractive_questions_over_seeded_text():
    a, b = make_examples(8, 30, 4, seed=3), make_examples(8, 30, 4, seed=3)
    assert a == b
    for example in a:
        words = example["context"].split()
        at = words.index(example["question_word"])
        # The answer is the words after (some occurrence of) the question word.
        starts = [i for i, w in enumerate(words) if w == example["question_word"]]
        assert any(" ".join(words[i + 1:i + 5]) == example["answer"] for i in starts), (example, at)


def test_tokenizer_covers_the_template_and_decodes_back():
    tokenizer = ChatTokenizer()
    inverse = {i: piece for piece, i in tokenizer.vocab.items()}
    for example in make_examples(20, 40, 4, seed=1):
        for text in (tokenizer.scaffold(example), example["context"], " " + example["answer"]):
            ids = tokenizer.encode(text)
            assert "".join(inverse[i] for i in ids) == text
    # Longest match: a template word is one token, not its letters.
    assert tokenizer.encode("assistant") == [tokenizer.vocab["assistant"]]
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tokenizer.encode("#")


def test_per_batch_and_cached_scaffolds_make_the_same_targets():
    workload = LatentWireWorkload("tiny")
    tokenizer, examples, contexts, answers = workload._data()
    latents = workload.params["latents"]
    per_batch = latentwire.Batches(tokenizer, examples, contexts, answers, latents, cached=False)
    cached = latentwire.Batches(tokenizer, examples, contexts, answers, latents, cached=True)
    _, tokens_a, targets_a = per_batch([3, 1])
    _, tokens_b, targets_b = cached([3, 1])
    width = tokens_a.shape[1]
    # The cached rows are padded to the longest scaffold of the data set, the per-batch rows to the batch's.
    assert torch.equal(tokens_a, tokens_b[:, :width]) and (tokens_b[:, width:] == tokenizer.pad_id).all()
    assert torch.equal(targets_a, targets_b[:, :latents + width])
    # Exactly the answer tokens are targets, each one predicted from the position before it.
    for row_tokens, row_targets, answer in zip(tokens_a, targets_a, answers[[3, 1]]):
        where = (row_targets != latentwire.IGNORE).nonzero().flatten()
        assert torch.equal(row_targets[where], answer)
        assert torch.equal(row_tokens[where - latents + 1], answer)


CONFIGS = [
    {},
    {"batch_size": 2},
    {"batch_size": 4, "scaffold": "cached"},
    {"batch_size": 16},  # the whole effective batch: one micro-batch per step
    {"loader": "dataloader", "num_workers": 0, "batch_size": 2},
    {"loader": "dataloader", "num_workers": 2, "batch_size": 4, "scaffold": "cached"},
    {"optimizer": "foreach", "set_to_none": True, "batch_size": 4},
    {"optimizer": "fused", "batch_size": 4},
    {"attention": "flash", "batch_size": 4},
    {"attention": "math", "checkpoint": True, "batch_size": 2},
]


@pytest.mark.parametrize("knobs", CONFIGS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()) or "baseline")
def test_every_knob_agrees_with_the_reference(tiny, space, knobs):
    workload, reference = tiny
    config = space.validate({**dict(space.baseline), **knobs})
    run = workload.build(config)
    first = workload.check(workload.to_reference(run()), reference, config)
    again = workload.check(workload.to_reference(run()), reference, config)  # every run starts afresh
    assert first.passed and again.passed, (first, again)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_is_judged_by_its_own_tolerance(tiny, space, precision):
    workload, reference = tiny
    config = space.validate({**dict(space.baseline), "precision": precision, "batch_size": 4})
    check = workload.check(workload.to_reference(workload.build(config)()), reference, config)
    assert check.passed, check
    assert check.metrics["update"][1] == TOLERANCES[precision]["update"] and check.metrics["update"][0] > 0


def test_compiled_training_agrees_with_the_reference(tiny, space):
    workload, reference = tiny
    config = space.validate({**dict(space.defaults), "precision": "fp32", "num_workers": 0, "compile": "default"})
    check = workload.check(workload.to_reference(workload.build(config)()), reference, config)
    assert check.passed, check


def test_the_model_learns_the_task():
    # A real training loop: repeated on the same samples, the answer loss falls.
    workload = LatentWireWorkload("tiny")
    tokenizer, examples, contexts, answers = workload._data()
    model = workload.model(len(tokenizer))
    context, tokens, targets = latentwire.Batches(tokenizer, examples, contexts, answers,
                                                  workload.params["latents"], cached=True)(range(16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        logits = model(context, tokens)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=latentwire.IGNORE)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0]


def test_targets_off_by_one_fail_the_check(tiny, space, monkeypatch):
    # The classic scaffold bug: each answer token predicted from its own position.
    workload, reference = tiny
    real_rows = latentwire._rows

    def shifted(*args):
        tokens, targets = real_rows(*args)
        return tokens, torch.roll(targets, 1, dims=1)

    monkeypatch.setattr(latentwire, "_rows", shifted)
    config = space.validate({**dict(space.baseline), "scaffold": "cached", "batch_size": 4})
    check = workload.check(workload.to_reference(workload.build(config)()), reference, config)
    assert not check.passed and check.metrics["losses"][0] > 1e-3


def test_stepping_at_the_wrong_effective_batch_fails_the_check(tiny, space):
    # Accumulation over half the micro-batches: twice the steps on the same samples.
    class HalfAccumulation(LatentWireWorkload):
        sizes = {"tiny": {**LatentWireWorkload.sizes["tiny"], "effective_batch": 2}}

    _, reference = tiny
    workload = HalfAccumulation("tiny")
    config = space.validate({**dict(space.baseline), "batch_size": 2})
    output = workload.to_reference(workload.build(config)())
    assert not workload.check(output, reference, config).passed


def test_nan_output_fails(tiny, space):
    workload, reference = tiny
    config = space.baseline
    output = {k: v.clone() for k, v in reference.items()}
    output["update"][0] = float("nan")
    assert not workload.check(output, reference, config).passed


def test_cpu_space_drops_cuda_only_knobs():
    cpu = load_space("latentwire").for_device(PROFILES["cpu"])
    assert cpu.parameters["pin_memory"].choices == (False,)
    assert cpu.parameters["non_blocking"].choices == (False,)
    assert set(cpu.parameters["attention"].choices) == {"auto", "math", "flash"}
    assert "reduce-overhead" not in cpu.parameters["compile"].choices
    v100 = load_space("latentwire").for_device(PROFILES["v100"])
    assert "bf16" not in v100.parameters["precision"].choices
    assert set(v100.parameters["attention"].choices) == {"auto", "math", "efficient"}
    assert set(load_space("latentwire").for_device(PROFILES["h100"]).parameters["attention"].choices) == {
        "auto", "math", "flash", "efficient", "cudnn"}


def test_items_are_the_lm_tokens_of_every_sample():
    workload = LatentWireWorkload("tiny")
    tokenizer, examples, _, _ = workload._data()
    p = workload.params
    expected = sum(p["latents"] + len(tokenizer.encode(tokenizer.scaffold(e))) + p["answer_len"] for e in examples)
    assert workload.items_per_run(load_space("latentwire").baseline) == expected


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("knobs", [
    {"pin_memory": True, "non_blocking": True, "loader": "dataloader", "num_workers": 2},
    {"pin_memory": True, "non_blocking": True, "batch_size": 4},
    {"attention": "efficient", "batch_size": 4},
    {"attention": "cudnn", "batch_size": 4, "precision": "bf16"},
    {"attention": "flash", "batch_size": 4, "precision": "fp16"},
    # On an H100 (2026-11-23) the backward pass raised "accessing tensor output of CUDAGraphs that has been
    # overwritten by a subsequent run": a parameter's gradient was the backward graph's output. With
    # workloads._torch.own_gradients it passed on an H100 (2026-11-25, benchmarks/gpu_runs/2026-11-25-h100/).
    {"compile": "reduce-overhead", "scaffold": "cached", "batch_size": 4},
])
def test_cuda_knobs_agree_with_the_reference(knobs):
    from autotune.devices import resolve_device

    space = load_space("latentwire").for_device(resolve_device("auto").profile)
    workload = LatentWireWorkload("tiny", device="cuda")
    reference = workload.to_reference(workload.build(space.reference)())
    config = space.validate({**dict(space.baseline), **knobs})
    check = workload.check(workload.to_reference(workload.build(config)()), reference, config)
    assert check.passed, check


@pytest.mark.parametrize("size", list(LatentWireWorkload.sizes))
def test_every_size_splits_its_widths_into_whole_heads(size):
    """`full` once had a 512-wide encoder with 12 heads: its first run on an H100 failed on a reshape."""
    p = LatentWireWorkload.sizes[size]
    assert p["enc_dim"] % p["heads"] == 0 and p["lm_dim"] % p["heads"] == 0


def test_clipped_norms_take_the_gradient_norms_bound_unless_every_reference_step_was_clipped():
    from workloads._training import step_metrics

    tolerances = {"grad_norms": 1e-3, "clipped_norms": 2e-6}
    hyper = torch.zeros(5, dtype=torch.float64)
    clipped_every_step = {"grad_norms": torch.tensor([1.4, 1.3]), "clipped_norms": torch.tensor([1.0, 1.0]),
                          "hyperparameters": hyper}
    one_step_unclipped = {"grad_norms": torch.tensor([1.4, 0.7]), "clipped_norms": torch.tensor([1.0, 0.7]),
                          "hyperparameters": hyper}
    norms = ("grad_norms", "clipped_norms")
    assert step_metrics(clipped_every_step, clipped_every_step, tolerances, norms)["clipped_norms"][1] == 2e-6
    assert step_metrics(one_step_unclipped, one_step_unclipped, tolerances, norms)["clipped_norms"][1] == 1e-3


def test_under_reduce_overhead_a_gradient_is_the_parameters_own_tensor_not_the_backwards_output():
    """Why workloads._torch.own_gradients exists, shown on the CPU.

    Without a hook a parameter's first gradient is the very tensor its backward produced (under CUDA graphs,
    memory the next replay overwrites) and later micro-batches add into it; with the hook it is a copy.
    Accumulation gives the same figures either way.
    """
    from workloads._torch import own_gradients

    produced = []

    class Emit(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w):
            return w.sum()

        @staticmethod
        def backward(ctx, g):
            out = torch.ones(3) * g
            produced.append(out.data_ptr())  # its address only: a reference held here would stop the steal
            return out

    for mode, own in (("none", False), ("default", False), ("max-autotune-no-cudagraphs", False),
                      ("reduce-overhead", True)):
        w = torch.zeros(3, requires_grad=True)
        own_gradients([w], mode)
        produced.clear()
        for _ in range(3):
            Emit.apply(w).backward()
        assert (w.grad.data_ptr() != produced[0]) == own, mode
        assert w.grad.tolist() == [3.0, 3.0, 3.0], mode
