"""The negative control: a check that passed must fail the output made plainly wrong, and each of its parts."""

import collections
import dataclasses
import warnings

import numpy as np
import pytest
import torch

from autotune.check import Check, relative_error
from autotune.control import MAX_PARTS, control, wrong_copy, wrong_parts


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
    reference = {"loss": torch.tensor(2.0), "grads": torch.arange(4.0), "steps": 3}  # a Python number: no part

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
    assert [part for part, _ in wrong_parts(reference)] == ["['loss']", "['grads']"]
    assert wrong_parts(torch.arange(4.0)) == [] and wrong_parts({"x": torch.ones(2), "n": 3}) == []  # one part
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
    for output, held in ((Opaque(), "a tests.test_control.*Opaque"), (None, "None"),
                         (itself, "a tests.test_control.*Itself")):
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


def test_integers_and_bools_beside_floats_are_each_made_wrong_alone():
    # A top-k split over the corpus forgot each block's offset: every index wrong, every score right. The whole
    # wrong copy keeps integers (a check may index with them), so a check of the scores alone passed it unseen.
    scores, indices = torch.tensor([[0.9, 0.8]]), torch.tensor([[4, 7]])
    reference = {"scores": scores, "indices": indices, "found": torch.tensor([True, False]), "k": 2}

    def checked(*names):
        workload = _Workload(1e-6)
        workload.check = lambda output, reference, config: Check.from_metrics(
            {name: (relative_error(output[name].double(), reference[name].double()), 1e-6) for name in names})
        return workload

    assert [part for part, _ in wrong_parts(reference)] == ["['indices']", "['found']"]  # not k, a Python number
    only = dict(wrong_parts(reference))
    assert torch.equal(only["['indices']"]["indices"], torch.tensor([[15, 9]])) and only["['indices']"]["scores"] is scores
    assert torch.equal(only["['found']"]["found"], torch.tensor([False, True]))
    for names, unread in ((("scores",), "indices"), (("scores", "indices"), "found")):
        with pytest.raises(ValueError, match=rf"its \['{unread}'\] alone made plainly wrong .*: it never compares"):
            control(checked(*names), Check(0.0, 1e-6, True), reference, reference, {})
    control(checked("scores", "indices", "found"), Check(0.0, 1e-6, True), reference, reference, {})
    gathers = _Workload(1e-6)  # a check that indexes with them raises on a wrong copy: it failed it
    gathers.check = lambda output, reference, config: Check.from_metrics(
        {"scores": (relative_error(output["scores"], reference["scores"]), 1e-6),
         "picked": (relative_error(torch.arange(8.0)[output["indices"]], torch.arange(8.0)[reference["indices"]]), 1e-6),
         "found": (relative_error(output["found"].double(), reference["found"].double()), 1e-6)})
    control(gathers, Check(0.0, 1e-6, True), reference, reference, {})
    ids = {"tokens": torch.tensor([3, 4]), "mask": torch.tensor([True, True])}  # no floats: the integers as a whole
    assert [part for part, _ in wrong_parts(ids)] == ["['mask']"]
    # Each copy is wrong where its name says: a Python number before a part is counted as a part of neither list.
    noted = {"k": 2, "indices": indices, "loss": 2.0, "grads": torch.ones(2)}
    made = dict(wrong_parts(noted))
    assert list(made) == ["['loss']", "['grads']", "['indices']"]
    assert made["['loss']"]["loss"] == 5.0 and made["['loss']"]["grads"] is noted["grads"]
    assert torch.equal(made["['indices']"]["indices"], torch.tensor([[15, 9]])) and made["['indices']"]["k"] == 2


def test_a_list_of_plain_numbers_is_one_part_as_the_errors_read_it():
    # A Python loop's 10,000 per-step values, as floats in a list, under bfloat16's 2e-2: relative_error reads the
    # list as one array, yet each float was a part made wrong alone, which one norm rightly weighs too little, so
    # every such trial failed the control; the same values in a tensor passed it.
    steps = [float(i % 7) + 1.0 for i in range(10_000)]
    bound = _Workload(2e-2)
    bound.check = lambda output, reference, config: Check.from_metrics(
        {"steps": (relative_error(output, reference), 2e-2)})
    control(bound, bound.check(steps, steps, {}), steps, steps, {})
    assert wrong_copy([1.0, 2.0, 3]) == [7, 5.0, 3.0] and wrong_copy((1, 2)) == (5, 3)  # as an array's: reversed
    assert wrong_parts(steps) == [] and [p for p, _ in wrong_parts({"x": torch.ones(2), "ids": [3, 4]})] == ["['ids']"]
    assert wrong_copy({"ok": True, "seen": [False, True]})["seen"] == [True, False]  # bools are no numbers here
    itself = _Workload(2e-2)
    itself.check = lambda output, reference, config: Check.from_metrics(
        {"steps": (relative_error(reference, reference), 2e-2)})
    with pytest.raises(ValueError, match="passed a plainly wrong output"):
        control(itself, itself.check(steps, steps, {}), steps, steps, {})
