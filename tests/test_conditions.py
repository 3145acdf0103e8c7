import pytest

from autotune.conditions import Condition, ConditionError


@pytest.mark.parametrize(
    "text, values, expected",
    [
        ("kernel == 'scan'", {"kernel": "scan"}, True),
        ("kernel != 'scan'", {"kernel": "scan"}, False),
        ("chunk >= 64 and chunk < 1024", {"chunk": 64}, True),
        ("chunk >= 64 and chunk < 1024", {"chunk": 1024}, False),
        ("dtype in ['float16', 'bfloat16']", {"dtype": "bfloat16"}, True),
        ("dtype not in ['float16', 'bfloat16']", {"dtype": "bfloat16"}, False),
        ("not debug", {"debug": False}, True),
        ("a or b and c", {"a": False, "b": True, "c": False}, False),  # and binds tighter
        ("(a or b) and c", {"a": True, "b": False, "c": True}, True),
        ("x == null", {"x": None}, True),
        ("flag == true", {"flag": True}, True),
        # Each spelling of a constant (found by mutating conditions.py: True, false and False read wrong passed).
        ("flag == True", {"flag": True}, True),
        ("flag == false", {"flag": False}, True),
        ("flag == False", {"flag": True}, False),
        ("x == None", {"x": None}, True),
        ("ratio > -0.5", {"ratio": 0.0}, True),
        ("chunk > 3", {"chunk": None}, False),  # an inactive parameter never orders
        ("(chunk > 3) == false", {"chunk": None}, True),  # and the comparison is false, not its whole condition
        ('mode == "max-autotune"', {"mode": "max-autotune"}, True),
    ],
)
def test_evaluates(text, values, expected):
    assert Condition.parse(text).evaluate(values) is expected


def test_names_are_the_parameters_read():
    assert Condition.parse("(a or b) and c in [d, 1]").names == {"a", "b", "c", "d"}


@pytest.mark.parametrize("text, said", [
    ("", "a condition must not be empty"),
    ("   ", "a condition must not be empty"),
    ("a ==", "expression ends too early: 'a =='"),
    ("a = 1", "unexpected character '=' at 2 in 'a = 1'"),
    ("__import__('os')", "unexpected '(' in \"__import__('os')\""),
    ("a and and b", "unexpected keyword 'and' in 'a and and b'"),
    ("[1, 2", "expected ']' but found 'the end' in '[1, 2'"),
    ("a.b == 1", "unexpected character '.' at 1 in 'a.b == 1'"),
    ("lambda: 1", "unexpected character ':' at 6 in 'lambda: 1'"),
    ("a == 1 1", "unexpected '1' in 'a == 1 1'"),
    ("a not b c", "unexpected 'not' in 'a not b c'"),
    ("a == )", "unexpected ')' in 'a == )'"),
    (3, "a condition must be a string, got 3"),  # a YAML number where a condition goes
    (None, "a condition must be a string, got None"),
])
def test_rejects_what_is_not_the_language_saying_where(text, said):
    # Each in its own words: one refusal that fell through to the next check would still raise, but say less.
    with pytest.raises(ConditionError) as refused:
        Condition.parse(text)
    assert str(refused.value) == said


def test_never_evaluates_python():
    # A name is only ever looked up in the values, never in Python's namespaces.
    assert Condition.parse("open == print").evaluate({}) is True  # both are null


@pytest.mark.parametrize("text, values, expected", [
    ("chunk % 64", {"chunk": 128}, False),  # bare arithmetic: its truth, as Python's
    ("chunk % 64", {"chunk": 100}, True),
    ("chunk % 64", {"chunk": None}, False),  # an inactive knob: false, as a comparison over it is
    ("not (chunk % 64)", {"chunk": None}, True),
    ("chunk // zero", {"chunk": 8, "zero": 0}, False),
    ("chunk // zero or chunk == 8", {"chunk": 8, "zero": 0}, True),
    ("dtype * 99999999999 == 'x'", {"dtype": "float32"}, False),  # a string knob: no arithmetic, no memory filled
])
def test_arithmetic_that_fails_is_false_never_an_error(text, values, expected):
    assert Condition.parse(text).evaluate(values) is expected


@pytest.mark.parametrize("text, fragment", [
    ("'ab' * 3 == 'ababab'", "takes numbers, not 'ab'"),
    ("x in [1, 2] + [3]", "not a list"),
    ("true + 1 == 2", "not True"),
    ("(x == 1) + 1 > 0", "not a truth value"),
    ("-null", "not None"),
    pytest.param("(" * 5000 + "x" + ")" * 5000, "nested too deeply", id="5000 brackets"),
    pytest.param("not " * 5000 + "x", "nested too deeply", id="5000 nots"),
    # A chain parses in a loop but nests its tree, which every walk descends: a RecursionError, as a traceback,
    # when the space was read (500 terms) or, past what its walk reached, when a config was judged.
    pytest.param(" and ".join(["x == 1"] * 500), "nested too deeply", id="500 ands"),
    pytest.param(" + ".join(["x"] * 500) + " > 0", "nested too deeply", id="500 sums"),
])
def test_what_cannot_be_arithmetic_or_is_too_deep_is_refused_when_parsed(text, fragment):
    with pytest.raises(ConditionError, match=fragment):
        condition = Condition.parse(text)
        condition.evaluate({"x": 1}), condition.names  # what would fail later, had it parsed


def test_a_long_chain_within_the_depth_limit_is_read_and_judged():
    condition = Condition.parse(" or ".join(f"x == {i}" for i in range(90)))
    assert condition.evaluate({"x": 89}) and not condition.evaluate({"x": 90}) and condition.names == {"x"}
