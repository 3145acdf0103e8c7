"""benchmarks/lsd_graph_race.py, the GPU diagnosis of lsd's cuda_graph knob: its plumbing, on the CPU."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import workloads.lsd as lsd
from autotune.devices import PROFILES
from tests.conftest import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
lsd_graph_race = load_benchmark("lsd_graph_race")


def test_the_hooks_wrap_every_replay_and_leave_the_knob_as_it_was(monkeypatch):
    calls = []
    # A stand-in for the CUDA graph: the replay is eps itself.
    monkeypatch.setattr(lsd, "_graphed", lambda eps, *args: eps)
    stand_in = lsd._graphed
    with lsd_graph_race._around_replay(before=lambda eps, x, t: calls.append("before"),
                                       after=lambda eps, x, t, out: calls.append(("after", float(out[0])))):
        replay = lsd._graphed(lambda x, t: x + t, (1,), torch.device("cpu"), torch.no_grad)
        assert float(replay(torch.ones(1), torch.ones(1))[0]) == 2.0
    assert calls == ["before", ("after", 2.0)] and lsd._graphed is stand_in


def test_keep_alive_holds_what_each_replay_saw(monkeypatch):
    monkeypatch.setattr(lsd, "_graphed", lambda eps, *args: eps)
    with lsd_graph_race.VARIANTS["keep-alive"]():
        lsd._graphed(lambda x, t: x * 2, (1,), torch.device("cpu"), torch.no_grad)(torch.ones(1), torch.zeros(1))
    assert len(lsd_graph_race.KEPT) == 3
    lsd_graph_race.KEPT.clear()


def test_blocking_copies_turn_non_blocking_off_and_back_on(monkeypatch):
    seen = []
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *args, **kwargs: seen.append(kwargs) or self)
    recorder = torch.Tensor.to
    with lsd_graph_race._blocking_copies():
        torch.ones(1).to("cpu", non_blocking=True)
    torch.ones(1).to("cpu", non_blocking=True)
    assert seen == [{"non_blocking": False}, {"non_blocking": True}] and torch.Tensor.to is recorder


def test_blocking_copies_take_non_blocking_by_position_too():
    # On the H100 (2026-11-25) the variant raised TypeError: a caller passed (device, None, True) and the
    # keyword came on top. The real Tensor.to runs here: a positional flag is turned off in its place.
    with lsd_graph_race._blocking_copies():
        moved = torch.ones(2).to(torch.device("cpu"), None, True)
        assert torch.ones(2, dtype=torch.float64).to(torch.float32, True).dtype == torch.float32
        assert torch.ones(1).to("cpu", non_blocking=True).shape == (1,)
    assert moved.tolist() == [1.0, 1.0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the error is for machines without CUDA")
def test_without_cuda_it_is_a_one_line_error():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "lsd_graph_race.py")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().endswith("needs a CUDA device; cuda_graph exists only there")


def test_cudnn_off_turns_cudnn_off_and_back_on():
    before = torch.backends.cudnn.enabled
    with lsd_graph_race.VARIANTS["cudnn-off"]():
        assert not torch.backends.cudnn.enabled
    assert torch.backends.cudnn.enabled == before


def test_keep_last_holds_only_the_last_replays_tensors(monkeypatch):
    monkeypatch.setattr(lsd, "_graphed", lambda eps, *args: eps)
    with lsd_graph_race.VARIANTS["keep-last"]():
        replay = lsd._graphed(lambda x, t: x * 2, (1,), torch.device("cpu"), torch.no_grad)
        replay(torch.ones(1), torch.zeros(1))
        second = torch.full((1,), 3.0)
        replay(second, torch.zeros(1))
    assert len(lsd_graph_race.KEPT) == 3 and lsd_graph_race.KEPT[0] is second
    assert float(lsd_graph_race.KEPT[2][0]) == 6.0
    lsd_graph_race.KEPT.clear()


def test_keep_run_releases_a_runs_tensors_when_the_next_run_starts(monkeypatch):
    kept_at_start = []

    class Workload:  # lsd's interface as check_errors uses it; each run replays the graphed eps twice
        def build(self, config):
            replay = lsd._graphed(lambda x, t: x + t, (1,), torch.device("cpu"), torch.no_grad)

            def run():
                kept_at_start.append(len(lsd_graph_race.KEPT))
                return replay(replay(torch.ones(1), torch.ones(1)), torch.ones(1))
            return run

        to_reference = staticmethod(lambda out: out)
        check = staticmethod(lambda out, ref, config: type("C", (), {"error": float((out - ref).abs().max()),
                                                                      "passed": bool(out.eq(ref).all())})())

    monkeypatch.setattr(lsd, "_graphed", lambda eps, *args: eps)
    monkeypatch.setattr(lsd_graph_race, "resolve_device", lambda name: type("D", (), {"profile": PROFILES["h100"]})())
    results = lsd_graph_race.check_errors("keep-run", Workload(), torch.full((1,), 3.0), runs=3)
    assert results == [(0.0, True)] * 3 and kept_at_start == [0, 0, 0] and lsd_graph_race.KEPT == []


@pytest.mark.parametrize("variant, index", [("keep-x", 0), ("keep-t", 1), ("keep-out", 2)])
def test_keep_one_holds_only_that_tensor_of_the_last_replay(monkeypatch, variant, index):
    monkeypatch.setattr(lsd, "_graphed", lambda eps, *args: eps)
    with lsd_graph_race.VARIANTS[variant]():
        replay = lsd._graphed(lambda x, t: x * 2, (1,), torch.device("cpu"), torch.no_grad)
        replay(torch.ones(1), torch.zeros(1))
        x, t = torch.full((1,), 3.0), torch.full((1,), 5.0)
        out = replay(x, t)
    assert len(lsd_graph_race.KEPT) == 1 and lsd_graph_race.KEPT[0] is (x, t, out)[index]
    lsd_graph_race.KEPT.clear()


def test_wrap_only_keeps_nothing_and_changes_no_output(monkeypatch):
    monkeypatch.setattr(lsd, "_graphed", lambda eps, *args: eps)
    lsd_graph_race.KEPT.clear()
    with lsd_graph_race.VARIANTS["wrap-only"]():
        replay = lsd._graphed(lambda x, t: x * 2, (1,), torch.device("cpu"), torch.no_grad)
        assert float(replay(torch.ones(1), torch.zeros(1))[0]) == 2.0
        assert replay.__name__ == "call"  # the script's wrapper, not the replay itself
    assert lsd_graph_race.KEPT == []


def test_model_freed_drops_the_replays_reference_to_the_model_and_puts_the_knob_back(monkeypatch):
    def stand_in(eps, *args):
        def replay(x, t):
            return x
        replay.captured = eps
        return replay

    monkeypatch.setattr(lsd, "_graphed", stand_in)
    with lsd_graph_race.VARIANTS["model-freed"]():
        replay = lsd._graphed(lambda x, t: x, (1,), torch.device("cpu"), torch.no_grad)
    assert not hasattr(replay, "captured") and lsd._graphed is stand_in
    assert hasattr(stand_in(lambda x, t: x), "captured")
