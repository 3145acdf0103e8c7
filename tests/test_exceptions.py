"""The errors a user can act on, and how one line names another error it stems from."""

from autotune.exceptions import AutotuneError, UnknownNameError, said


def test_another_error_is_named_by_its_type_and_its_message_s_first_line():
    assert said(OSError(28, "No space left on device")) == "OSError: [Errno 28] No space left on device"
    assert said(ValueError("first line\n  traceback-like detail")) == "ValueError: first line"
    # One without words is its type alone, not "KeyboardInterrupt: " (a mutant swapped the two).
    assert (said(KeyboardInterrupt()), said(RuntimeError("  \n"))) == ("KeyboardInterrupt", "RuntimeError")


def test_an_unknown_name_lists_the_valid_ones_in_order_with_its_hint():
    error = UnknownNameError("size", "huge", ["small", "full", "tiny"], hint="Sizes are the workload's")
    assert str(error) == "unknown size 'huge'; valid: full, small, tiny. Sizes are the workload's"
    assert isinstance(error, (AutotuneError, KeyError)) and error.valid == ["full", "small", "tiny"]
    assert str(UnknownNameError("workload", "x", [])) == "unknown workload 'x'; valid: (none)"
