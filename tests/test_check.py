"""The two ways an output's error is measured: the norm of the whole, and the worst element."""

import collections
import dataclasses
import math
import warnings

import numpy as np
import pytest
import torch

from autotune.check import (MAX_PARTS, Check, control, differs, relative_error, share_of_tolerance, worst_error,
                            wrong_copy, wrong_parts)


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


def test_a_wrong_copy_changes_every_float_and_keeps_the_shape_integers_and_bools():
    Pair = collections.namedtuple("Pair", "a b")
    output = {"x": torch.arange(4.0), "n": torch.arange(3), "flag": torch.tensor(True), "s": 2.0,
              "pair": Pair(torch.ones(2, 2), "name"), "seq": [torch.tensor(0.5)]}
    wrong = wrong_copy(output)
    assert torch.equal(wrong["x"], torch.tensor([7.0, 5.0, 3.0, 1.0]))  # doubled plus one, reversed
    assert wrong["n"] is output["n"] and wrong["flag"] is output["flag"]  # a check may index with integers
    assert wrong["s"] == 5.0 and wrong["pair"].b == "name" and torch.equal(wrong["pair"].a, torch.full((2, 2), 3.0))
    assert type(wrong["pair"]) is Pair and torch.equal(wrong["seq"][0], torch.tensor(2.0))
    assert torch.equal(output["x"], torch.arange(4.0))  # the output itself untouched
    assert wrong_copy({"empty": torch.zeros(0), "none": None}) is None  # nothing to make wrong
    # Bools alone (a mask): negated, else such an output had no control.
    assert torch.equal(wrong_copy({"flag": torch.tensor([True, False]), "empty": torch.zeros(0)})["flag"],
                       torch.tensor([False, True]))
    # No floating part: the integers are made wrong (token ids, an argmax), else such an output had no control.
    ids = wrong_copy({"ids": torch.arange(3), "empty": torch.zeros(0), "steps": 4, "flag": True})
    assert torch.equal(ids["ids"], torch.tensor([5, 3, 1])) and ids["steps"] == 9 and ids["flag"] is True
    assert wrong_copy({"x": torch.full((3,), -1.0), "s": -1.0}) is None  # nothing it changes: no control
    assert np.array_equal(wrong_copy([np.arange(3.0)])[0], [5.0, 3.0, 1.0])  # a numpy output too
    largest = torch.max(torch.tensor([[1.0, 5.0], [3.0, 2.0]]), dim=1)  # torch's named tuple of values, indices
    wrong = wrong_copy({"max": largest, "sparse": torch.tensor([1.0, 2.0]).to_sparse()})
    assert type(wrong["max"]) is type(largest) and torch.equal(wrong["max"].values, torch.tensor([7.0, 11.0]))
    # A sparse tensor has no scalar to add: made wrong dense, then sparse again (kept as it was, a sparse output
    # alone had no control).
    assert wrong["sparse"].is_sparse and torch.equal(wrong["sparse"].to_dense(), torch.tensor([5.0, 3.0]))
    with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state"
        warnings.simplefilter("ignore", UserWarning)
        csr = torch.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse_csr()
        wrong_csr = wrong_copy(csr)
    assert wrong_csr.layout == torch.sparse_csr and not torch.equal(wrong_csr.to_dense(), csr.to_dense())  # not COO

    @dataclasses.dataclass
    class Out:  # an output class of a workload's own
        loss: torch.Tensor
        steps: int

    # float8, complex32 and uint16 have no arithmetic of their own: such an output had no control at all.
    for dtype in (torch.float8_e4m3fn, torch.complex32, torch.uint16):
        made = wrong_copy(torch.arange(4).to(dtype))
        assert made.dtype == dtype and torch.equal(made.to(torch.complex64).real, torch.tensor([7.0, 5.0, 3.0, 1.0]))
    # ... in the wider type of their kind: through whole numbers a half (float8) or an imaginary part (complex32)
    # was cut off, found by mutating check.py (each kind's wider type swapped passed every test).
    made = wrong_copy(torch.tensor([0.5, 1.5]).to(torch.float8_e4m3fn))
    assert torch.equal(made.to(torch.float32), torch.tensor([4.0, 2.0]))
    made = wrong_copy(torch.tensor([1 + 0.5j, 2 - 1j]).to(torch.complex32))
    assert torch.equal(made.to(torch.complex64), torch.tensor([5 - 2j, 3 + 1j]))

    wrong = wrong_copy(Out(torch.tensor(2.0), 3))
    assert type(wrong) is Out and wrong.loss.item() == 5.0 and wrong.steps == 3
    # Python bools alone (found by mutating check.py: negating them or not passed every test), and NumPy text.
    assert wrong_copy({"ok": True, "seen": [False]}) == {"ok": False, "seen": [True]}
    assert wrong_copy(np.array(["ab", "cd"])).tolist() == ["cd?", "ab?"] and wrong_copy(np.array("ab")) == "ab?"
    assert wrong_copy(torch.full((2,), -1.0).to_sparse()) is None  # a sparse -1 made wrong stays itself: no control
    # A block-sparse tensor has no such arithmetic, and made dense it cannot be made block-sparse again without its
    # block size (torch's RuntimeError): it stays as it is, and the rest of the output is made wrong.
    blocks = torch.arange(16.0).reshape(4, 4).to_sparse_bsr((2, 2))
    made = wrong_copy({"blocks": blocks, "loss": torch.tensor(2.0)})
    assert made["blocks"] is blocks and made["loss"].item() == 5.0


def test_a_check_that_never_compares_a_part_of_the_output_fails_the_trial():
    # A workload whose output gained its gradients after its check was written: a config wrong in them alone passed.
    reference = {"loss": torch.tensor(2.0), "grads": torch.arange(4.0), "steps": torch.tensor(3)}

    class LossOnly:
        def check(self, output, reference, config):
            return Check.from_metrics({"loss": (relative_error(output["loss"], reference["loss"]), 1e-6)})

    class Both(LossOnly):
        def check(self, output, reference, config):
            return Check.from_metrics({"loss": (relative_error(output["loss"], reference["loss"]), 1e-6),
                                       "grads": (relative_error(output["grads"], reference["grads"]), 1e-6)})

    partial = LossOnly()
    with pytest.raises(ValueError, match=r"LossOnly.check passed this config's first output with its \['grads'\] "
                                         r"alone made plainly wrong .* compare it with the reference, or leave it out"):
        control(partial, partial.check(reference, reference, {}), reference, reference, {})
    whole = Both()
    control(whole, whole.check(reference, reference, {}), reference, reference, {})  # every float part compared
    assert [part for part, _ in wrong_parts(reference)] == ["['loss']", "['grads']"]  # integers are no part
    assert wrong_parts(torch.arange(4.0)) == [] and wrong_parts({"x": torch.ones(2), "n": torch.arange(3)}) == []  # one part
    # Each part alone is a check of the whole output: 1,000 per-sample tensors took 15.6 s a trial, checked alike.
    many = [part for part, _ in wrong_parts([torch.ones(2)] * 1000)]
    assert len(many) == MAX_PARTS and many[0] == "[0]" and many[-1] == "[999]"
    # One norm over parts of 1,000,000 and 10 values weighs the 10 too little: said as such, not as "never compares".
    torch.manual_seed(0)
    layers = {"grads": [torch.randn(1000, 1000), torch.randn(10)]}
    diluted = _Workload(2e-2)
    diluted.check = lambda output, reference, config: Check.from_metrics(
        {"grads": (relative_error(output["grads"], reference["grads"]), 2e-2)})
    with pytest.raises(ValueError, match=r"its \['grads'\]\[1\] alone made plainly wrong .*: it never compares that "
                                         r"part, or one norm over every part weighs it too little"):
        control(diluted, diluted.check(layers, layers, {}), layers, layers, {})
    only = dict(wrong_parts(reference))["['grads']"]
    assert torch.equal(only["grads"], torch.tensor([7.0, 5.0, 3.0, 1.0])) and only["loss"] is reference["loss"]


class _Workload:
    def __init__(self, tolerance, raises=False):
        self.tolerance, self.raises = tolerance, raises

    def check(self, output, reference, config):
        if self.raises and output.max() > reference.max():
            raise ValueError("out of range")
        return Check.from_metrics({"x": (relative_error(output, reference), self.tolerance)})


def test_a_check_that_passes_a_plainly_wrong_output_fails_the_trial():
    # A tuner finds any wrong output its check passes: a tolerance of 1e3 (a typo for 1e-3) passed every output.
    reference = torch.arange(4.0)
    lax = _Workload(1e3)
    with pytest.raises(ValueError, match=r"_Workload.check passed a plainly wrong output under this config .*x 2\.24 <= tolerance 1e\+03"):
        control(lax, lax.check(reference, reference, {}), reference, reference, {})
    for honest in (_Workload(1e-6), _Workload(1e3, raises=True)):  # a wrong output failed, or refused by raising
        control(honest, honest.check(reference, reference, {}), reference, reference, {})
    control(lax, Check(1.0, 0.5, False), reference, reference, {})  # no pass, no control
    itself = _Workload(1e-6)
    itself.check = lambda output, reference, config: Check.from_metrics({"x": (relative_error(output, output), 1e-6)})
    with pytest.raises(ValueError, match="passed a plainly wrong output"):  # an output compared with itself
        control(itself, itself.check(reference, reference, {}), reference, reference, {})
    with pytest.raises(ValueError, match="passed a plainly wrong output"):  # integers alone: made wrong too
        control(lax, lax.check(torch.arange(4), torch.arange(4), {}), torch.arange(4), torch.arange(4), {})
    with pytest.raises(ValueError, match="each bool negated"):  # bools alone (a mask): negated, else no control
        control(lax, lax.check(torch.tensor(True), torch.tensor(True), {}), torch.tensor(True),
                torch.tensor(True), {})


class _Result:
    """An output class of a workload's own, no dataclass."""

    def __init__(self, values):
        self.values = values


class _AttributeDict(dict):
    """A dict read by attribute (EasyDict, a model output)."""

    __getattr__ = dict.__getitem__


def test_a_check_is_held_to_a_control_whatever_the_output_holds():
    # A check that compares the reference with itself passes everything: each output below held no part a wrong copy
    # was made of (an object of the workload's own, text, a NumPy scalar, a dict read by attribute, which became a plain
    # dict and made the check raise, read as failing), and a wrong kernel passed and was tuned.
    def lax(reads):
        workload = _Workload(1e-9)
        workload.check = lambda output, reference, config: Check.from_metrics(
            {"x": (relative_error(reads(output), reads(output)), 1e-9)})
        return workload

    outputs = [(_Result(torch.arange(4.0)), lambda o: o.values, "each float doubled"),
               (_AttributeDict(loss=torch.tensor(2.0)), lambda o: o.loss, "each float doubled"),
               ({"tokens": ["the", "cat"]}, lambda o: len(o["tokens"]), "each string reversed and marked"),
               (b"encoded", lambda o: len(o), "each string reversed and marked"),
               (np.float32(2.5), lambda o: o, "each float doubled"),
               (np.array([True, False]), lambda o: o, "each bool negated"),
               (3 + 1j, lambda o: o, "each float doubled")]
    for output, reads, how in outputs:
        with pytest.raises(ValueError, match=f"passed a plainly wrong output under this config .*{how}"):
            workload = lax(reads)
            control(workload, workload.check(output, output, {}), output, output, {})
    wrong = wrong_copy(_Result({"grads": torch.ones(2), "n": 3}))
    assert type(wrong) is _Result and torch.equal(wrong.values["grads"], torch.full((2,), 3.0))
    assert type(wrong_copy(_AttributeDict(x=1.0))) is _AttributeDict and wrong_copy(_AttributeDict(x=1.0))["x"] == 3.0
    shared = [torch.ones(1)]  # one list held twice, no loop: made wrong in both places
    assert [part[0].item() for part in wrong_copy({"a": shared, "b": shared}).values()] == [3.0, 3.0]
    looped = _Result(torch.ones(1))
    looped.me = looped  # an object that holds itself is walked once
    assert wrong_copy(looped).values.item() == 3.0
    honest = _Workload(1e-6)  # compares the attribute: its wrong copy fails, so its pass stands
    honest.check = lambda output, reference, config: Check.from_metrics({"x": (relative_error(output.values,
                                                                                              reference), 1e-6)})
    control(honest, honest.check(_Result(torch.ones(2)), torch.ones(2), {}), _Result(torch.ones(2)), torch.ones(2), {})

    class Opaque:  # an array of another library (cupy's): neither data autotune knows nor a container of it
        __slots__ = ("device",)

    class Itself(_Result):  # its copy is itself: made wrong, the output would have been
        def __copy__(self):
            return self

    itself = Itself(torch.ones(2))
    for output, held in ((Opaque(), "a tests.test_check.*Opaque"), (None, "None"),
                         (itself, "a tests.test_check.*Itself")):
        with pytest.raises(ValueError, match=f"holds no part a wrong copy can be made of \\({held}\\), so the check "
                                             "cannot be held to a control"):
            workload = lax(lambda o: 1.0)
            control(workload, workload.check(output, output, {}), output, output, {})
    assert torch.equal(itself.values, torch.ones(2))  # the output itself untouched
    # An opaque piece beside data a wrong copy is made of: the copy is the control, and an honest check passes it.
    beside = {"x": torch.ones(2), "handle": Opaque()}
    honest = _Workload(1e-6)
    honest.check = lambda output, reference, config: Check.from_metrics({"x": (relative_error(output["x"],
                                                                                              reference["x"]), 1e-6)})
    control(honest, honest.check(beside, beside, {}), beside, beside, {})

    @dataclasses.dataclass
    class Positive:  # a class that refuses its wrong copy
        loss: float

        def __post_init__(self):
            if self.loss > 3:
                raise ValueError("a loss past 3")

    with pytest.raises(ValueError, match=r"no plainly wrong copy of it could be made .*\(ValueError: a loss past 3\)"):
        workload = lax(lambda o: o.loss)
        control(workload, workload.check(Positive(2.0), Positive(2.0), {}), Positive(2.0), Positive(2.0), {})


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


def test_a_reference_config_failing_against_its_own_stored_form_blames_to_reference():
    # A workload of mine stored its float64 reference as float32 ("to save space"): every float64 config failed, the
    # reference config too, and that was said to be an output "not the same from one process to the next".
    class Lossy(_Workload):
        def to_reference(self, output):
            return output.float()

    output = torch.linspace(0, 1, 1000, dtype=torch.float64) / 3
    lossy, honest = Lossy(1e-12), _Workload(1e-12)
    honest.to_reference = lambda output: output
    failed = lossy.check(output, lossy.to_reference(output), {})
    assert not failed.passed
    with pytest.raises(ValueError, match=r"Lossy.to_reference changes the output it stores: the reference config's "
                                         r"own output fails against it \(x 2\.\d+e-08 > tolerance 1e-12\)"):
        control(lossy, failed, output, lossy.to_reference(output), {}, is_reference=True)
    control(lossy, failed, output, lossy.to_reference(output), {})  # another config's failure: its own, as before
    control(honest, Check(1.0, 0.5, False), output, output, {}, is_reference=True)  # unseeded, say: not the storing

    class Strict(Lossy):  # a check that refuses the stored form by raising: it says nothing of what storing lost
        def check(self, output, reference, config):
            if reference.dtype != torch.float64:
                raise TypeError(f"a float64 reference is compared, not {reference.dtype}")
            return super().check(output, reference, config)

    control(Strict(1e-12), Check(1.0, 0.5, False), output, output, {}, is_reference=True)  # its own failure stands


def test_the_warnings_of_a_check_run_on_a_wrong_copy_or_a_stored_reference_are_not_shown():
    # The control's checks are autotune's, not the user's: a wrong copy's overflow would warn once per trial.
    class Warns(_Workload):
        def check(self, output, reference, config):
            warnings.warn("overflow in the check", RuntimeWarning)
            return super().check(output, reference, config)

        def to_reference(self, output):
            return output

    output, workload = torch.arange(4.0), Warns(1e-6)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        control(workload, Check(0.0, 1e-6, True), output, output, {})  # its wrong copy checked, failed
        control(workload, Check(1.0, 1e-6, False), output, output, {}, is_reference=True)  # its stored form checked
    assert shown == []
