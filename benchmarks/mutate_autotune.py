"""Which small changes to one of autotune's own modules its tests let through: a mutation run.

The planted bugs of ``tests/mutants`` prove the workloads' checks; this proves the tests of autotune's own code.
Each site of the module (a comparison, an arithmetic operator, ``and``/``or``, ``not``, a number, a bool, an
``if``'s test, a returned value, the test of an ``a if c else b`` and of a ``while``, a call's keyword argument, a
call made for its effect alone, an ``except``'s handler, a ``raise``) is changed alone (a keyword argument is dropped,
leaving the callee's default; a call whose value is not used is made ``pass``; a handler's body is made ``raise``, so
the fault it caught goes on up; a ``raise`` is made ``pass``), the given tests run with ``-x``, and a
change no test fails is a survivor: code whose behaviour no test pins. The tests must pass on the unchanged module
first, and each change they fail names the test that failed it. Each survivor is listed with the line it changed.
Some change nothing (``return None`` made ``return None``, which shows no line; ``<`` made ``<=`` on measured
times); the rest are tests to write.

It never touches this checkout: the module is mutated in a throwaway git worktree of HEAD (so commit first),
whose package the tests import (``PYTHONPATH``), removed at the end.

    python benchmarks/mutate_autotune.py autotune/check.py -- tests/test_check.py tests/test_contract.py
    python benchmarks/mutate_autotune.py autotune/conditions.py --sites 3,4,59 -- tests/test_conditions.py
    python benchmarks/mutate_autotune.py autotune/check.py --kinds ifexp,while -- tests/test_check.py
    python benchmarks/mutate_autotune.py autotune/check.py --kinds keyword -- tests/test_check.py
    python benchmarks/mutate_autotune.py autotune/check.py --kinds call -- tests/test_check.py
    python benchmarks/mutate_autotune.py autotune/check.py --kinds except,raise -- tests/test_check.py

Measured on this 2-core CPU (2026-11-29): 1 to 86 s a mutant with quick tests (one that loops is
stopped at --timeout); the findings are in the README
("The tests of autotune's own code").
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPARED = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
ARITHMETIC = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
              ast.Mod: ast.FloorDiv}
KINDS = ("compare", "arithmetic", "and/or", "not", "bool", "number", "if", "return", "ifexp", "while", "keyword",
         "call", "except", "raise")


def sites(tree: ast.AST) -> list[tuple[ast.AST, str, int]]:
    """Every place one change can be made, in a fixed order: ``(node, kind, index of the comparison or keyword)``."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    found: list[tuple[ast.AST, str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found += [(node, "compare", i) for i, op in enumerate(node.ops) if type(op) in COMPARED]
        elif isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
            found.append((node, "arithmetic", 0))
        elif isinstance(node, ast.BoolOp):
            found.append((node, "and/or", 0))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            found.append((node, "not", 0))
        elif isinstance(node, ast.Constant) and id(node) not in docstrings and isinstance(node.value, (int, float)):
            found.append((node, "bool" if isinstance(node.value, bool) else "number", 0))
        elif isinstance(node, ast.If):
            found.append((node, "if", 0))
        elif isinstance(node, ast.Return) and node.value is not None:
            found.append((node, "return", 0))
    # Numbered after the others, so a site's number from a run before these kinds were added still names it.
    found += [(node, "ifexp", 0) for node in ast.walk(tree) if isinstance(node, ast.IfExp)]
    found += [(node, "while", 0) for node in ast.walk(tree)  # `while True:` is the bool's site already
              if isinstance(node, ast.While) and not isinstance(node.test, ast.Constant)]
    found += [(node, "keyword", i) for node in ast.walk(tree) if isinstance(node, ast.Call)  # not a **mapping
              for i, word in enumerate(node.keywords) if word.arg is not None]
    # A call whose value nothing reads is made for what it does (a write, a flush, a lock's release, a warning).
    found += [(node, "call", 0) for node in ast.walk(tree)
              if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)]
    # A handler is there for a fault, a raise for a refusal: each is code only a test that makes it happen can pin.
    found += [(node, "except", 0) for node in ast.walk(tree) if isinstance(node, ast.ExceptHandler)  # not `raise`
              if not (len(node.body) == 1 and isinstance(node.body[0], ast.Raise) and node.body[0].exc is None)]
    found += [(node, "raise", 0) for node in ast.walk(tree) if isinstance(node, ast.Raise)]
    return found


class _DropNot(ast.NodeTransformer):
    def __init__(self, target: ast.AST) -> None:
        self.target = target

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        return node.operand if node is self.target else self.generic_visit(node)


class _DropCall(ast.NodeTransformer):
    def __init__(self, target: ast.AST) -> None:
        self.target = target

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        return ast.Pass() if node is self.target else self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> ast.AST:
        return ast.Pass() if node is self.target else node


def mutant(tree: ast.Module, index: int) -> tuple[str, int, str]:
    """The module's source with site ``index`` changed, the site's line, and its kind."""
    tree = copy.deepcopy(tree)
    node, kind, i = sites(tree)[index]
    line = node.keywords[i].lineno if kind == "keyword" else getattr(node, "lineno", 0)  # a long call's own line
    if kind == "compare":
        node.ops[i] = COMPARED[type(node.ops[i])]()
    elif kind == "arithmetic":
        node.op = ARITHMETIC[type(node.op)]()
    elif kind == "and/or":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "not":
        tree = _DropNot(node).visit(tree)
    elif kind == "bool":
        node.value = not node.value
    elif kind == "number":
        node.value = node.value + 1 if node.value in (0, 1) else node.value * 2
    elif kind in ("if", "ifexp", "while"):
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif kind == "keyword":
        del node.keywords[i]
    elif kind in ("call", "raise"):
        tree = _DropCall(node).visit(tree)
    elif kind == "except":  # the fault it caught goes on up, as if the handler were not there
        node.body = [ast.Raise()]
    else:
        node.value = ast.Constant(value=None)
    return ast.unparse(ast.fix_missing_locations(tree)), line, kind


def change(tree: ast.Module, text: str) -> list[str]:
    """The lines a mutant changed, as ``-`` and ``+`` lines of the module's unparsed text (comments gone); a long
    line (a table written as one statement) from a little before where the two differ."""
    lines = [line for line in difflib.unified_diff(ast.unparse(tree).splitlines(), text.splitlines(), lineterm="", n=0)
             if line[:1] in "+-" and line[:3] not in ("---", "+++")]
    if len(lines) == 2 and max(map(len, lines)) > 150:
        old, new = (line[1:] for line in lines)
        at = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        start = max(0, at - 60)
        return [f"{sign}{'...' if start else ''}{line[start:start + 120]}{'...' if len(line) > start + 120 else ''}"
                for sign, line in (("-", old), ("+", new))]
    return [line.strip() for line in lines]


def run_tests(work: Path, tests: list[str], timeout: float) -> str | None:
    """Run ``tests`` on the tree in ``work``: None if they pass, else the first test that failed (or why none did)."""
    try:
        # A session of their own: a mutant of _forkserver.py took pid 0 for its trial's and SIGKILLed "its" process
        # group, this run's own, which ended with no word.
        run = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests], cwd=work,
                             capture_output=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(work)},
                             start_new_session=True)
    except subprocess.TimeoutExpired:  # a mutant that loops: a test would hang on it, so it is caught
        return f"past --timeout {timeout:g} s"
    if run.returncode == 0:
        return None
    said = run.stdout.decode(errors="replace").splitlines()
    failed = next((line.split()[1] for line in said if line.startswith(("FAILED ", "ERROR "))), None)
    return failed or f"pytest exit {run.returncode}: {(said or [''])[-1]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="a module of this checkout, e.g. autotune/check.py")
    parser.add_argument("--sites", help="comma-separated site numbers (default: every site)")
    parser.add_argument("--kinds", help=f"comma-separated kinds of site to run, of {', '.join(KINDS)} (default: "
                        "every kind)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds a mutant's tests may run (then killed)")
    parser.add_argument("tests", nargs="+", help="after --: the test files (and pytest options) to run")
    args = parser.parse_args()
    source = (ROOT / args.module).read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    kinds = set(args.kinds.split(",")) if args.kinds else set(KINDS)
    if kinds - set(KINDS):
        parser.error(f"--kinds: unknown kind {', '.join(sorted(kinds - set(KINDS)))}; kinds: {', '.join(KINDS)}")
    every = sites(tree)
    if args.sites and not all(s.strip().isdigit() for s in args.sites.split(",")):
        parser.error(f"--sites: comma-separated site numbers, not {args.sites!r}")
    chosen = [int(s) for s in args.sites.split(",")] if args.sites else range(len(every))
    if any(not 0 <= index < len(every) for index in chosen):
        parser.error(f"--sites: {args.module} has sites 0 to {len(every) - 1}")
    chosen = [index for index in chosen if every[index][1] in kinds]
    survivors = []
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(work), "HEAD"], check=True)
        try:
            print(f"{args.module}: {len(every)} sites, {len(chosen)} to run, in {work}", flush=True)
            # Run in the background, a test of Ctrl-C failed on every mutant (SIGINT is ignored there): each read
            # as killed. A mutant is told apart only by tests that pass without it.
            failed = run_tests(work, args.tests, args.timeout)
            if failed is not None:
                print(f"the tests fail on the unchanged module ({failed}): no mutant can be judged by them; make them "
                      "pass here first", file=sys.stderr)
                return 2
            for index in chosen:
                text, line, kind = mutant(tree, index)
                (work / args.module).write_text(text)
                started = time.monotonic()
                failed = run_tests(work, args.tests, args.timeout)
                shown = lines[line - 1].strip()[:100] if line else ""
                print(f"{index:4d} L{line:<4d} {kind:10s} {'SURVIVED' if failed is None else 'killed':8s} "
                      f"{time.monotonic() - started:5.1f}s  {shown}", flush=True)
                if failed is not None:  # which test: one that fails for another cause kills every mutant alike
                    print(f"{'':22s}by {failed}", flush=True)
                else:  # with the change it made: "return None" made "return None" is no gap
                    survivors.append("\n".join([f"{index:4d} L{line:<4d} {kind}",
                                                *(f"       {edit}" for edit in change(tree, text))]))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work)], check=False)
    print(f"\n{len(survivors)} survivors of {len(chosen)}", *survivors, sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
