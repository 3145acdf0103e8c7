"""benchmarks/mutate_autotune.py: every site of a module changed once, alone, and the change it made shown."""

import ast

from tests.conftest import load_benchmark

SOURCE = '''def f(a, b):
    """A docstring is no site."""
    if a < b and not a:
        return a + 1
    return True
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
        (5, "return", ["-    return True", "+    return None"]),
        (5, "bool", ["-    return True", "+    return False"]),
    ])
    assert ast.unparse(tree) == ast.unparse(ast.parse(SOURCE))  # the module's own tree is left as it was
