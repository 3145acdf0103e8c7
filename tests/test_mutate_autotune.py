"""benchmarks/mutate_autotune.py: every site of a module changed once, alone, and the change it made shown."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import load_benchmark

ROOT = Path(__file__).resolve().parent.parent

SOURCE = '''def f(a, b):
    """A docstring is no site."""
    if a < b and not a:
        return a + 1
    while b:
        b = None
    while True:
        break
    return True if a else b


print(f(1,
        b=2), **{"sep": ""})
try:
    f(0, 0)
except ValueError:
    raise KeyError("b")
except KeyError:
    raise
'''


def test_each_site_is_changed_alone_and_its_change_is_the_line_it_made():
    mutate = load_benchmark("mutate_autotune")
    tree = ast.parse(SOURCE)
    made = []
    for index in range(len(mutate.sites(tree))):
        text, line, kind = mutate.mutant(tree, index)
        made.append((line, kind, mutate.change(tree, text)))
    assert sorted(made) == sorted([
        (3, "if", ["-    if a < b and (not a):", "+    if not (a < b and (not a)):"]),
        (3, "and/or", ["-    if a < b and (not a):", "+    if a < b or not a:"]),
        (3, "compare", ["-    if a < b and (not a):", "+    if a <= b and (not a):"]),
        (3, "not", ["-    if a < b and (not a):", "+    if a < b and a:"]),
        (4, "return", ["-        return a + 1", "+        return None"]),
        (4, "arithmetic", ["-        return a + 1", "+        return a - 1"]),
        (4, "number", ["-        return a + 1", "+        return a + 2"]),
        (5, "while", ["-    while b:", "+    while not b:"]),
        (7, "bool", ["-    while True:", "+    while False:"]),  # the `while`'s own site is this one
        (9, "return", ["-    return True if a else b", "+    return None"]),
        (9, "bool", ["-    return True if a else b", "+    return False if a else b"]),
        (9, "ifexp", ["-    return True if a else b", "+    return True if not a else b"]),
        (12, "number", ["-print(f(1, b=2), **{'sep': ''})", "+print(f(2, b=2), **{'sep': ''})"]),
        (13, "number", ["-print(f(1, b=2), **{'sep': ''})", "+print(f(1, b=4), **{'sep': ''})"]),
        # A keyword argument is dropped (the callee's default then), on the line it was written; a **mapping is not.
        (13, "keyword", ["-print(f(1, b=2), **{'sep': ''})", "+print(f(1), **{'sep': ''})"]),
        # A call whose value is not used is made `pass`, on the statement's first line.
        (12, "call", ["-print(f(1, b=2), **{'sep': ''})", "+pass"]),
        (15, "call", ["-    f(0, 0)", "+    pass"]),
        (15, "number", ["-    f(0, 0)", "+    f(1, 0)"]),
        (15, "number", ["-    f(0, 0)", "+    f(0, 1)"]),
        # A handler's body is made a bare `raise` (one that is a bare `raise` already is no site); a `raise`, `pass`.
        (16, "except", ["-    raise KeyError('b')", "+    raise"]),
        (17, "raise", ["-    raise KeyError('b')", "+    pass"]),
        (19, "raise", ["-    raise", "+    pass"]),
    ])
    assert ast.unparse(tree) == ast.unparse(ast.parse(SOURCE))  # the module's own tree is left as it was
    # The kinds added later are numbered last: a site's number from a run before them still names the same site.
    assert [kind for _, kind, _ in mutate.sites(tree)][-8:] == ["ifexp", "while", "keyword", "call", "call", "except",
                                                                 "raise", "raise"]


@pytest.mark.parametrize("option, said", [
    (["--kinds", "ifexp,iff"], "--kinds: unknown kind iff; kinds: compare, arithmetic, and/or, not, bool, number, if, "
                               "return, ifexp, while, keyword, call, except, raise"),
    (["--sites", "0,{count}"], "--sites: autotune/exceptions.py has sites 0 to {last}"),
    (["--sites", "0-3"], "--sites: comma-separated site numbers, not '0-3'"),  # was a ValueError's traceback
])
def test_a_kind_or_site_the_module_has_not_is_refused_in_one_line(option, said):
    count = len(load_benchmark("mutate_autotune").sites(ast.parse((ROOT / "autotune/exceptions.py").read_text())))
    option, said = [word.format(count=count) for word in option], said.format(last=count - 1)
    done = subprocess.run([sys.executable, "benchmarks/mutate_autotune.py", "autotune/exceptions.py", *option, "--",
                           "tests/test_registry.py"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.splitlines()[-1] == f"mutate_autotune.py: error: {said}"


def test_a_change_in_a_long_line_is_shown_where_it_is():
    mutate = load_benchmark("mutate_autotune")
    tree = ast.parse("TABLE = {" + ", ".join(f"'k{i}': {i + 2}" for i in range(40)) + "}\n")
    index = next(i for i, (node, _, _) in enumerate(mutate.sites(tree)) if getattr(node, "value", None) == 35)
    old, new = mutate.change(tree, mutate.mutant(tree, index)[0])
    assert old.startswith("-...") and new.startswith("+...") and "'k33': 35" in old and "'k33': 70" in new


def test_a_run_of_the_tests_says_the_test_that_failed_or_the_timeout(tmp_path, monkeypatch):
    # A test that failed for another cause (a Ctrl-C test run in the background, where SIGINT is ignored) killed
    # every mutant alike, unseen: each kill now names its test, and the tests are run on the unchanged module first.
    mutate = load_benchmark("mutate_autotune")
    (tmp_path / "test_some.py").write_text("import os, time\n"
                                           "def test_fails():\n    assert os.environ.get('FAIL') != '1'\n"
                                           "def test_loops():\n    time.sleep(60 if os.environ.get('LOOP') else 0)\n")
    assert mutate.run_tests(tmp_path, ["test_some.py"], timeout=60) is None
    assert mutate.run_tests(tmp_path, ["test_some.py", "-k", "nothing_so_named"], timeout=60).startswith("pytest exit 5")
    monkeypatch.setenv("FAIL", "1")
    assert mutate.run_tests(tmp_path, ["test_some.py"], timeout=60) == "test_some.py::test_fails"
    monkeypatch.setenv("FAIL", "0")
    monkeypatch.setenv("LOOP", "1")
    assert mutate.run_tests(tmp_path, ["test_some.py"], timeout=1.5) == "past --timeout 1.5 s"


def test_a_mutant_that_kills_its_process_group_kills_only_its_tests(tmp_path):
    # Run in a process of its own: were the tests in the run's group, the mutant would end that process too.
    (tmp_path / "test_some.py").write_text("import os, signal\n"
                                           "def test_kills_its_group():\n    os.killpg(0, signal.SIGKILL)\n")
    script = ("from tests.conftest import load_benchmark\nmutate = load_benchmark('mutate_autotune')\n"
              f"print(mutate.run_tests(mutate.Path({str(tmp_path)!r}), ['test_some.py'], 60))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          start_new_session=True, cwd=ROOT)
    assert (done.returncode, done.stdout) == (0, "pytest exit -9: \n"), done.stderr
