"""The contract every workload is held to, parametrised over every registered workload at `tiny`.

A new workload inherits the same bar: its baseline and defaults pass their
check, a build's runs agree, its reference is plain tensor data, every knob
value runs as named (and passes, where a plainly wrong output fails) or is
refused with a reason that names the knob, and every planted bug of it
(tests/mutants) fails its check, but those measured as missed and said so (Mutant.missed_in).
"""

from __future__ import annotations

import io

import pytest
import torch

from autotune.control import control
from autotune.registry import workload_names
from tests.mutants import WORKLOADS, mutants_of
from tests.mutants.harness import Bench, knob_values, precision_knob

NAMES = workload_names()
@pytest.fixture
def bench(request, benches) -> Bench:
    return benches(request.param)


def test_the_contract_covers_every_built_in_workload():
    assert set(WORKLOADS) <= set(NAMES)


@pytest.mark.parametrize("bench", NAMES, indirect=True)
@pytest.mark.parametrize("which", ["baseline", "defaults"])
def test_baseline_and_defaults_pass(bench, which):
    config = getattr(bench.space, which)
    check = bench.check(config)
    assert check.passed, check


@pytest.mark.parametrize("bench", NAMES, indirect=True)
def test_two_runs_of_one_build_agree(bench):
    config = bench.space.defaults
    run = bench.workload.build(config)
    first = bench.workload.to_reference(run())
    again = run()
    assert bench.workload.check(again, first, config).passed


@pytest.mark.parametrize("bench", NAMES, indirect=True)
def test_the_reference_is_plain_tensor_data(bench):
    buffer = io.BytesIO()
    torch.save(bench.reference, buffer)
    buffer.seek(0)
    torch.load(buffer, weights_only=True)  # what the runner loads: no pickled code


@pytest.mark.parametrize("bench", NAMES, indirect=True)
def test_every_knob_value_runs_as_named_or_is_refused_with_a_reason(bench):
    refused = []
    for values in knob_values(bench):
        config = bench.config(values)
        try:
            run = bench.workload.build(config)
        except ValueError as exc:
            # Refused: the reason names the knob, so the trial's error says what to change.
            assert any(name in str(exc) for name in values), (values, exc)
            refused.append(values)
            continue
        output = run()
        check = bench.workload.check(output, bench.reference, config)
        assert check.passed, (values, check)
        control(bench.workload, check, output, bench.reference, config)  # and it fails a plainly wrong output
    assert len(refused) < len(knob_values(bench))


@pytest.mark.parametrize("bench", [n for n in NAMES if n in WORKLOADS], indirect=True)
def test_every_planted_bug_fails(bench):
    name = bench.workload.name
    precision = bench.space.baseline[precision_knob(name)]
    missed = [m.name for m in mutants_of(name) if bench.check(bench.mutant_config(m, precision), m).passed]
    known = [m.name for m in mutants_of(name) if str(precision) in m.missed_in]  # measured, documented: still missed
    assert missed == known
