"""The two ways an output's error is measured: the norm of the whole, and the worst element."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from autotune.check import Check, differs, relative_error, share_of_tolerance, worst_error


def test_the_worst_element_counts_in_full_where_the_norm_dilutes_it():
    reference = np.full(10_000, -4.0)
    lost = reference.copy()
    lost[-1] = 0.0  # one step of 10,000 lost
    assert relative_error(lost, reference) == 0.01
    assert worst_error(lost, reference) == 1.0
    assert worst_error(torch.tensor(lost), torch.tensor(reference)) == 1.0


def test_an_error_is_relative_whatever_the_size_of_the_reference():
    # Found by mutating check.py: `norm > 0` made `norm > 1` passed every test, and a reference of norm under 1
    # (probabilities, a loss of 0.3) would then be held to an absolute error, half as strict at 0.5.
    assert relative_error(torch.tensor([0.5]), torch.tensor([0.25])) == 1.0
    assert worst_error(torch.tensor([0.5, 0.0]), torch.tensor([0.25, 0.0])) == 1.0
    assert relative_error(np.full(4, 3e-4), np.full(4, 2e-4)) == pytest.approx(0.5)
    assert relative_error({"a": torch.ones(2)}, torch.ones(2)) == math.inf  # a dict against a tensor: another shape
    assert relative_error(torch.ones(2), {"a": torch.ones(2)}) == math.inf


def test_the_share_of_a_tolerance_an_error_has_used():
    # What picks the worst metric of a trial (Check.from_metrics, the runner, the report): a reversed test would put the
    # least failing metric in the trial's error.
    assert share_of_tolerance(0.5, 0.25) == 2.0 and share_of_tolerance(0.1, 0.4) == 0.25
    assert share_of_tolerance(None, 1.0) == math.inf  # unbounded (a NaN output)
    assert share_of_tolerance(0.0, 0.0) == 0.0 and share_of_tolerance(1e-12, 0.0) == math.inf  # a bound of 0
    assert Check.from_metrics({"loss": (0.2, 0.1), "grads": (0.9, 1.0)}).metric == "loss"
    # By its share, not by its name nor by the error alone: "grads" sorts first and has the smaller error.
    worst = Check.from_metrics({"grads": (0.2, 0.1), "loss": (0.9, 1.0)})
    assert (worst.metric, worst.error, worst.tolerance) == ("grads", 0.2, 0.1)


def test_errors_of_narrow_numpy_types_are_computed_in_float64():
    # A workload's NumPy output in int8 or float16, compared in its own type: 127 - (-128) wraps in int8 and
    # 60000 - (-60000) overflows float16 (with both casts dropped, int8's error read 1.0 where it is 1.99).
    for kind, high, low in (("int8", 127, -128), ("float16", 60000.0, -60000.0)):
        value, reference = np.array([high, 1], dtype=kind), np.array([low, 1], dtype=kind)
        assert worst_error(value, reference) == pytest.approx((high - low) / abs(low)), kind
        assert relative_error(value, reference) == pytest.approx((high - low) / math.hypot(low, 1)), kind


def test_the_worst_element_of_an_output_that_cannot_be_compared_is_unbounded():
    reference = np.ones(4)
    assert worst_error(np.array([1.0, math.nan, 1.0, 1.0]), reference) == math.inf
    assert worst_error(np.ones(3), reference) == math.inf  # another shape
    assert worst_error(np.full(4, 0.5), np.zeros(4)) == 0.5  # a zero reference: the error itself
    assert worst_error(np.zeros(0), np.zeros(0)) == 0.0


@pytest.mark.parametrize("error", [relative_error, worst_error])
def test_an_infinity_the_reference_holds_at_the_same_place_is_exact_and_any_other_is_unbounded(error):
    # Every output failed against a reference holding an honest -inf (an impossible step's log-probability).
    inf = math.inf
    reference = np.array([-1.0, -inf, -2.0])
    assert error(np.array([-1.0, -inf, -2.0]), reference) == 0
    assert 0 < error(np.array([-1.0, -inf, -2.1]), reference) < 0.1  # the finite part is compared as before
    assert error(torch.tensor([-1.0, -inf, -2.0]), torch.tensor(reference)) == 0
    for wrong in ([-1.0, inf, -2.0], [-1.0, -5.0, -2.0], [-inf, -inf, -2.0], [-1.0, -inf, math.nan]):
        assert error(np.array(wrong), reference) == inf, wrong
    assert error(reference, np.array([-1.0, -5.0, -2.0])) == inf  # an infinity the reference lacks
    assert error(np.ones(2), np.array([1.0, math.nan])) == inf  # a NaN reference matches nothing


@pytest.mark.parametrize("error", [relative_error, worst_error])
def test_a_complex_output_wrong_only_in_its_imaginary_part_fails(error):
    # Cast to float64, the imaginary part was dropped: an FFT's output wrong there passed with an error of 0.
    right = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    wrong = torch.tensor([1 + 2j, 3 + 1j], dtype=torch.complex64)
    assert error(wrong, right) > 0.4 and error(right.numpy(), right.numpy()) == 0
    assert error(right.conj(), right.conj().resolve_conj()) == 0  # a conjugate view reads as its values
    assert error(torch.tensor([1.0, 3.0]), right) > 0.4  # a real output lacks the imaginary part: wrong
    assert error(torch.tensor([1.0, 3.0]), torch.tensor([1 + 0j, 3 + 0j])) == 0


def test_an_output_that_is_no_number_is_numpy_s_error_not_a_distance():
    # A word where the reference holds a number is the workload's to mend (its check compares the wrong thing):
    # NumPy's words reach the trial's error, not an error of autotune's own making.
    with pytest.raises(ValueError, match="could not convert string to float"):
        relative_error("a", 1.0)


def test_a_negative_error_is_refused_as_a_check_that_would_pass_anything():
    # A workload whose check gave a signed difference passed every output below the reference, however far.
    from autotune.check import Check

    with pytest.raises(ValueError, match="the error of 'loss' is -3: an error is a distance, 0 or more"):
        Check.from_metrics({"counts": (0.0, 1e-3), "loss": (-3.0, 1e-3)})
    assert Check.from_metrics({"loss": (0.0, 0.0)}).passed and not Check.from_metrics({"loss": (1.0, 0.5)}).passed
    with pytest.raises(ValueError, match="^a check needs at least one metric$"):  # a check of nothing
        Check.from_metrics({})


@pytest.mark.parametrize("tolerance, shown", [(math.inf, "inf"), (-1e-3, "-0.001"), (math.nan, "nan")])
def test_a_tolerance_that_is_not_a_finite_bound_is_refused(tolerance, shown):
    # An infinite tolerance (a bound divided by a zero count, say) passed every output, the worst too.
    from autotune.check import Check

    with pytest.raises(ValueError, match=f"the tolerance of 'loss' is {shown}: a tolerance is a finite bound"):
        Check.from_metrics({"counts": (0.0, 1e-3), "loss": (1e9, tolerance)})


def test_a_check_built_by_hand_must_say_passed_as_its_errors_do():
    # A workload's Check(error=1, tolerance=0.1, passed=True) was trusted: its output took part as correct.
    from autotune.check import Check

    with pytest.raises(ValueError, match="a Check with error 1 and tolerance 0.1 says passed=True"):
        Check(1.0, 0.1, True)
    with pytest.raises(ValueError, match="says passed=True"):
        Check(0.0, 0.1, True, "a", {"a": (0.0, 0.1), "b": (2.0, 1.0)})  # another metric is past its tolerance
    with pytest.raises(ValueError, match="says passed=False"):
        Check(0.05, 0.1, False)
    with pytest.raises(ValueError, match="says passed=True"):
        Check(math.nan, 0.1, True)
    check = Check(0.05, 0.1, np.bool_(True))
    assert check.passed is True and Check(math.inf, 0.0, False).passed is False  # the mutant harness's Check
    failed = Check(1.0, 0.1, False)
    with pytest.raises(dataclasses.FrozenInstanceError):  # nor passed once built: the rule holds for its life
        failed.passed = True


@pytest.mark.parametrize("args, message", [
    ((0.5, math.inf, True), "the tolerance of 'loss' is inf: a tolerance is a finite bound"),
    ((-1.0, 0.1, True), "the error of 'loss' is -1: an error is a distance"),
    ((0.0, 0.1, True, "loss", {"loss": (0.0, math.inf)}), "the tolerance of 'loss' is inf"),
    ((5.0, 0.1, True, "loss", {"loss": (0.0, 0.1)}), "says passed=True"),  # its headline past its tolerance
])
def test_a_check_built_by_hand_is_held_to_the_rules_of_from_metrics(args, message):
    # from_metrics refused an infinite tolerance and a negative error, but Check(0.5, inf, True) built by hand
    # made the trial ok: a workload's check could pass any output the rules are there to fail.
    from autotune.check import Check

    with pytest.raises(ValueError, match=message):
        Check(*args[:3], *(args[3:] or ("loss",)))


def test_a_check_built_by_hand_stores_plain_floats():
    # A torch or numpy error was kept as it came, for the study's JSON to refuse; a NaN error was written as NaN.
    import torch

    from autotune.check import Check

    check = Check(torch.tensor(0.05), np.float32(0.1), True, "loss")
    assert type(check.error) is float and type(check.tolerance) is float and check.error == pytest.approx(0.05)
    assert Check(math.nan, 0.1, False).to_dict()["error"] is None
    # Each metric's too: an unbounded one is null, a bounded one its figure (a mutant swapped the two).
    stored = Check.from_metrics({"loss": (math.nan, 0.1), "grads": (0.05, 0.1)}).to_dict()
    assert stored["metrics"] == {"loss": [None, 0.1], "grads": [0.05, 0.1]} and stored["error"] is None


def test_why_an_output_failed_says_whether_its_first_run_passed_and_whether_it_is_the_reference():
    passed, failed = Check(0.0, 1e-9, True, "y"), Check(1.5, 1e-9, False, "y")
    assert differs(failed, failed, False) == "output differs from the reference: y error 1.5 > tolerance 1e-09"
    assert differs(passed, failed, False) == ("output differs from the reference at a later run (the first run's "
                                              "passed: does a run change what the next one reads?): y error 1.5 > "
                                              "tolerance 1e-09")
    assert "this is the reference config itself" in differs(failed, failed, True)
    assert differs(passed, failed, True) == differs(passed, failed, False)  # its first run passed: not unseeded


@pytest.mark.parametrize("pair", [0.1, (0.1,), ("a", 1.0), (None, 1.0), (0.1, 1.0, 2.0)])
def test_a_metric_that_is_not_an_error_and_a_tolerance_says_so(pair):
    # Python's words named no metric and no rule: "cannot unpack non-iterable float object".
    from autotune.check import Check

    with pytest.raises(ValueError, match="metric 'loss' must be an \\(error, tolerance\\) pair of numbers, got"):
        Check.from_metrics({"counts": (0.0, 1e-3), "loss": pair})


def test_errors_compare_an_output_of_parts_part_by_part():
    # A training workload's per-layer gradients (tensors of several shapes, which require grad) were no array to
    # NumPy: relative_error(output["grads"], reference["grads"]) raised "inhomogeneous shape" or "Can't call numpy()
    # on Tensor that requires grad", and a dict of parts "float() argument must be ... not 'dict'".
    reference = [torch.full((3,), 2.0), torch.ones(2)]
    output = [torch.full((3,), 2.0, requires_grad=True) * 1, torch.full((2,), 1.1)]
    assert relative_error(output, reference) == pytest.approx(math.sqrt(2 * 0.01) / math.sqrt(12 + 2))
    assert worst_error(output, reference) == pytest.approx(0.1 / 2)  # the worst element against the largest
    assert relative_error({"w": reference, "loss": 2.0}, {"loss": 2.0, "w": reference}) == 0.0  # keys in any order
    for other in ([reference[0]], [reference[0], torch.ones(3)], {"x": reference}):  # a part missing, or another
        assert relative_error(other, reference) == math.inf and worst_error(other, reference) == math.inf
    assert relative_error([torch.ones(2), torch.ones(2)], torch.ones(2, 2)) == 0.0  # against them stacked: as before
    assert relative_error([torch.tensor([math.nan]), torch.ones(1)], [torch.zeros(1), torch.ones(1)]) == math.inf
    assert relative_error([1.0, 2.0], [1.0, 2.0]) == 0.0 and relative_error([], []) == 0.0
    sparse = torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse()  # "can't convert Sparse layout tensor to numpy"
    assert relative_error(sparse, sparse.to_dense()) == 0.0 and worst_error(sparse * 2, sparse.to_dense()) == 1.0


def test_relative_error_sums_its_squares_without_blas(monkeypatch):
    # np.linalg.norm's dot woke OpenBLAS's threads in each trial's forked process, and they spun on the cores the
    # runs timed next needed: a 0.2 ms run stalled 4 ms every 15 or so (benchmarks/blas_spin.py). The same norm,
    # by numpy's own pairwise sum.
    import numpy as np

    value, reference = np.random.default_rng(0).standard_normal((2, 300, 7))
    expected = np.linalg.norm(value - reference) / np.linalg.norm(reference)

    def no_blas(*args, **kwargs):
        raise AssertionError("a BLAS call")

    monkeypatch.setattr(np.linalg, "norm", no_blas)
    assert relative_error(value, reference) == pytest.approx(expected, rel=1e-14)
    assert relative_error(reference, reference) == 0.0 and relative_error(value, np.zeros_like(value)) > 0
