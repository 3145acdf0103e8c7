"""autotune.limits: a Tuner's numbers and names held to what the command line's options allow, refused in one line."""

import pytest

from autotune.exceptions import AutotuneError
from autotune.limits import MAX_SECONDS, check_numbers


@pytest.mark.parametrize("given, said", [
    ({"study_name": 3}, "study_name 3 is refused: it is no string"),
    ({"storage": 3}, "storage 3 is refused: it is no string"),
    ({"studies": 3}, "studies 3 is refused: it is no path (a str or a Path)"),
    ({"studies": " "}, "studies ' ' is refused: it names no folder"),
    ({"storage": "-"}, "storage '-' is refused: it names no storage"),
    ({"storage": "sqlite:x.db"}, "storage 'sqlite:x.db' is refused: it lacks the '//' of a URL"),
    ({"threads": 0}, "threads must be a whole number of at least 1, not 0"),  # no bound worth saying above
    ({"seed": 2**32}, "seed must be a whole number of at least 0, at most 4,294,967,295, not 4294967296"),
    ({"trial_timeout": 0}, f"trial_timeout must be a number of seconds over 0, at most {MAX_SECONDS:,}, not 0"),
    ({"measurer": {"min_time": 0}}, "measurer's min_time must be a number over 0, not 0"),
    ({"measurer": {"min_time": MAX_SECONDS * 2}}, "measurer's min_time must be a number over 0, not 2000000000"),
    ({"measurer": {"min_runs": 2.5}}, "measurer's min_runs must be a whole number over 0, not 2.5"),
    ({"measurer": {"min_runs": 2**63}}, "measurer's min_runs must be a whole number over 0, not 9223372036854775808"),
    ({"measurer": {"min_runs": True}}, "measurer's min_runs must be a whole number over 0, not True"),
    ({"measurer": {"block_seconds": -1}}, "measurer's block_seconds must be a number 0 or more, not -1"),
])
def test_a_number_or_name_out_of_bounds_says_what_is_allowed(given, said):
    with pytest.raises(AutotuneError) as refused:
        check_numbers(**given)
    assert str(refused.value).startswith(said), str(refused.value)


def test_numbers_and_names_within_bounds_pass():
    # Each bound itself is allowed: a storage that names one, a folder, the most seconds, a float's settings.
    check_numbers(study_name="mine", storage="sqlite:///a.db", studies="s", threads=1, seed=2**32 - 1,
                  trial_timeout=MAX_SECONDS, measurer={"min_time": 0.5, "min_runs": 2**62, "hopeless_below": None})
    # 0 blocks: each run timed alone, as until 2026-12-08 (Measurer.block_seconds); refused as "over 0" before.
    check_numbers(measurer={"block_seconds": 0})
