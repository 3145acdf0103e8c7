"""benchmarks/check_power.py on a workload of one's own: the README's `distances`, as a user saves it."""

from __future__ import annotations

from tests.conftest import load_benchmark


def test_a_workload_of_one_s_own_is_swept_and_held_to_the_control(readme_example):
    # It took built-ins alone ("invalid choice"), though the README asks a user to show their check's power.
    check_power = load_benchmark("check_power")
    rows = check_power.measure(f"{readme_example / 'distances.py'}:DistancesWorkload", seeds=3)
    assert [row["precision"] for row in rows] == ["float64", "float32"]
    for row in rows:
        # One data seed (its size has no seed), every method of the sweep honest, each wrong copy far past its bound.
        assert row["honest_runs"] == 3 and row["honest_binding_ratio"] < 1 and row["wrong_copy_ratio"] > 100
        assert (row["caught"], row["planted"]) == (0, 0)  # none planted here: plant them as tests/mutants does
    assert "| none planted | 0 / 0 |" in check_power.markdown(rows)


LSE = '''
import torch

from autotune import Workload
from autotune.check import Check, relative_error


class ChunkedLse(Workload):
    name = "lse"
    unit = "values"
    sizes = {"tiny": {"length": 4096}, "small": {"length": 2**20}, "full": {"length": 2**24}}

    def build(self, config):
        x = torch.randn(self.params["length"], generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        x = x.to(getattr(torch, config["dtype"]))
        if config["method"] == "whole":
            return lambda: torch.logsumexp(x, 0).double()
        chunks = x.view(-1, config["chunk"])  # raises where the chunk does not divide the length

        def chunked():
            m = chunks.max(1).values
            top = m.max()
            return (top + torch.log((torch.exp(chunks - m[:, None]).sum(1) * torch.exp(m - top)).sum())).double()
        return chunked

    def items_per_run(self, config):
        return self.params["length"]

    def check(self, output, reference, config):
        return Check.from_metrics({"lse": (relative_error(output, reference),
                                           1e-12 if config["dtype"] == "float64" else 1e-6)})
'''


def test_a_combination_the_space_s_constraints_rule_out_is_not_swept(tmp_path):
    # A chunk that must divide the length: the sweep built the range's top (65,536) at tiny's 4,096, and a traceback
    # from the workload's build ended it.
    (tmp_path / "lse.py").write_text(LSE)
    (tmp_path / "lse.yaml").write_text(
        "schema_version: 1\nworkload: lse\nparameters:\n  method: {choices: [whole, chunked]}\n"
        "  chunk: {type: int, low: 16, high: 65536, log: true, condition: \"method == 'chunked'\"}\n"
        "  dtype: {choices: [float64, float32]}\nsize_parameters: [length]\n"
        "constraints: [\"method == 'whole' or length % chunk == 0\"]\n"
        "baseline: {method: whole, dtype: float64}\ndefaults: {method: chunked, chunk: 1024, dtype: float32}\n"
        "reference: {method: whole, dtype: float64}\n")
    rows = load_benchmark("check_power").measure(f"{tmp_path / 'lse.py'}:ChunkedLse", seeds=1)
    assert [(row["precision"], row["honest_runs"]) for row in rows] == [("float64", 3), ("float32", 3)]
    assert all(row["honest_binding_ratio"] < 1 and row["wrong_copy_ratio"] > 100 for row in rows)
