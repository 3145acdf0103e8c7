"""A small, safe expression language for conditions and constraints of a search space.

A condition decides whether a parameter is active, for example
``messages == 'scan' and dtype in ['float32', 'float64']``; a constraint
says which combinations of values may run at all, for example
``32 <= block_size_x * block_size_y <= 1024``. An expression is parsed into a
tree once and evaluated against a config's values; nothing is ever passed to
``eval``.

Grammar (lowest precedence first)::

    expr       := and_expr ('or' and_expr)*
    and_expr   := not_expr ('and' not_expr)*
    not_expr   := 'not' not_expr | comparison
    comparison := sum (('==' | '!=' | '<' | '<=' | '>' | '>=' | 'in' | 'not in') sum)*
    sum        := term (('+' | '-') term)*
    term       := unary (('*' | '/' | '//' | '%') unary)*
    unary      := '-' unary | operand
    operand    := NUMBER | STRING | true | false | null | NAME | '[' expr, ... ']' | '(' expr ')'

Comparisons chain as in Python (``a < b < c`` is ``a < b and b < c``). A name
refers to a parameter; an inactive parameter's value is ``null``. Arithmetic
or ordering on a null, or a division by zero, makes its comparison false.
"""

from __future__ import annotations

import operator
import re
from functools import cached_property
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterator, Mapping

from autotune.config import show
from autotune.exceptions import SearchSpaceError
from autotune.export import is_number

__all__ = ["Condition", "ConditionError", "name_problem", "parse_constraints", "size_read", "values_named"]


class ConditionError(SearchSpaceError):
    """A condition that does not parse, or that names an unknown parameter."""


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<number>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)
      | (?P<string>'[^']*'|"[^"]*")
      | (?P<op>==|!=|<=|>=|<|>|//|\+|-|\*|/|%|\(|\)|\[|\]|,)
      | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
    )""",
    re.VERBOSE,
)

_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}
_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
}
_CONSTANTS = {"true": True, "True": True, "false": False, "False": False, "null": None, "None": None}
_KEYWORDS = {"and", "or", "not", "in"}


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a parameter (None: it can): a condition must be able to read it, and
    ``--set name=value`` to set it. (A knob may share a device capability's name: it shadows it.)"""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name):
        return f"{name!r} is not a name of letters, digits and _ (not starting with a digit)"
    if name in _CONSTANTS or name in _KEYWORDS:
        return f"{name!r} is a word of the condition language"
    return None


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            at = len(text) - len(text[pos:].lstrip())
            raise ConditionError(f"unexpected character {text[at]!r} at {at} in {text!r}")
        kind = match.lastgroup
        assert kind is not None
        tokens.append((kind, match.group(kind)))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        index = self.pos + offset
        return self.tokens[index] if index < len(self.tokens) else None

    def accept(self, value: str) -> bool:
        token = self.peek()
        if token is not None and token[0] in ("op", "name") and token[1] == value:
            self.pos += 1
            return True
        return False

    def expect(self, value: str) -> None:
        if not self.accept(value):
            found = self.peek()
            raise ConditionError(
                f"expected {value!r} but found {found[1] if found else 'the end'!r} in {self.text!r}"
            )

    def parse(self) -> tuple:
        if not self.tokens:
            raise ConditionError("a condition must not be empty")
        tree = self.expr()
        if self.peek() is not None:
            raise ConditionError(f"unexpected {self.peek()[1]!r} in {self.text!r}")  # type: ignore[index]
        return tree

    def expr(self) -> tuple:
        node = self.and_expr()
        while self.accept("or"):
            node = ("or", node, self.and_expr())
        return node

    def and_expr(self) -> tuple:
        node = self.not_expr()
        while self.accept("and"):
            node = ("and", node, self.not_expr())
        return node

    def not_expr(self) -> tuple:
        if self.accept("not"):
            return ("not", self.not_expr())
        return self.comparison()

    def comparison(self) -> tuple:
        left = self.sum()
        links = []
        while True:
            token = self.peek()
            if token == ("name", "not") and self.peek(1) == ("name", "in"):
                self.pos += 2
                links.append(("cmp", "not in", left, right := self.sum()))
            elif token is not None and token[1] in _COMPARISONS and token[0] in ("op", "name"):
                self.pos += 1
                links.append(("cmp", token[1], left, right := self.sum()))
            else:
                break
            left = right
        if not links:
            return left
        node = links[0]
        for link in links[1:]:  # a < b < c: a < b and b < c
            node = ("and", node, link)
        return node

    def sum(self) -> tuple:
        node = self.term()
        while (token := self.peek()) is not None and token[0] == "op" and token[1] in ("+", "-"):
            self.pos += 1
            node = self.arith(token[1], node, self.term())
        return node

    def term(self) -> tuple:
        node = self.unary()
        while (token := self.peek()) is not None and token[0] == "op" and token[1] in ("*", "/", "//", "%"):
            self.pos += 1
            node = self.arith(token[1], node, self.unary())
        return node

    def unary(self) -> tuple:
        if self.accept("-"):
            return self.arith("-", ("const", 0), self.unary())
        return self.operand()

    def arith(self, op: str, left: tuple, right: tuple) -> tuple:
        for side in (left, right):  # arithmetic takes numbers; a knob's value is only known when evaluated
            if side[0] in ("list", "cmp", "and", "or", "not") or side[0] == "const" and not is_number(side[1]):
                shown = {"list": "a list", "const": repr(side[1])}.get(side[0], "a truth value")
                raise ConditionError(f"arithmetic {op!r} takes numbers, not {shown}, in {self.text!r}")
        return ("arith", op, left, right)

    def operand(self) -> tuple:
        token = self.peek()
        if token is None:
            raise ConditionError(f"expression ends too early: {self.text!r}")
        kind, value = token
        self.pos += 1
        if kind == "number":
            number = float(value)
            return ("const", int(number) if number.is_integer() and "." not in value and "e" not in value.lower() else number)
        if kind == "string":
            return ("const", value[1:-1])
        if kind == "name":
            if value in _CONSTANTS:
                return ("const", _CONSTANTS[value])
            if value in _KEYWORDS:
                raise ConditionError(f"unexpected keyword {value!r} in {self.text!r}")
            return ("name", value)
        if value == "(":
            node = self.expr()
            self.expect(")")
            return node
        if value == "[":
            items: list[tuple] = []
            if not self.accept("]"):
                items.append(self.expr())
                while self.accept(","):
                    items.append(self.expr())
                self.expect("]")
            return ("list", items)
        raise ConditionError(f"unexpected {value!r} in {self.text!r}")


def _names(node: tuple) -> set[str]:
    kind = node[0]
    if kind == "name":
        return {node[1]}
    if kind == "const":
        return set()
    if kind == "list":
        return set().union(*(_names(item) for item in node[1])) if node[1] else set()
    if kind in ("cmp", "arith"):
        return _names(node[2]) | _names(node[3])
    return set().union(*(_names(child) for child in node[1:]))


def _evaluate(node: tuple, values: Mapping[str, Any]) -> Any:
    kind = node[0]
    if kind == "const":
        return node[1]
    if kind == "name":
        return values.get(node[1])
    if kind == "list":
        return [_evaluate(item, values) for item in node[1]]
    if kind == "not":
        return not _truth(node[1], values)
    if kind == "and":
        return _truth(node[1], values) and _truth(node[2], values)
    if kind == "or":
        return _truth(node[1], values) or _truth(node[2], values)
    if kind == "arith":
        left, right = _evaluate(node[2], values), _evaluate(node[3], values)
        # Numbers only: a string or a list repeated by a large number would fill memory, and a null (an inactive
        # parameter) has no value. The TypeError, or a ZeroDivisionError, reaches the nearest comparison or
        # boolean operand, which is then false.
        if not (is_number(left) and is_number(right)):
            raise TypeError(f"arithmetic on {left!r} and {right!r}")
        return _ARITHMETIC[node[1]](left, right)
    try:
        return _COMPARISONS[node[1]](_evaluate(node[2], values), _evaluate(node[3], values))
    except (TypeError, ZeroDivisionError):
        # Ordering or arithmetic on a null (an inactive parameter), or a division by zero, is simply false.
        return False


def _truth(node: tuple, values: Mapping[str, Any]) -> bool:
    """A boolean operand's truth: bare arithmetic (``chunk % 64``) that fails on a null or a zero is false, as a
    comparison over it is."""
    try:
        return bool(_evaluate(node, values))
    except (TypeError, ZeroDivisionError):
        return False


#: Levels of nesting a condition may have (brackets, `not`, and each link of an and/or/arithmetic chain).
MAX_DEPTH = 100


def _children(node: tuple) -> list[tuple]:
    """The nodes directly under ``node``: a list's items, else the parts that are nodes (not an operator or a name)."""
    parts = node[1] if node[0] == "list" else node[1:]
    return [part for part in parts if isinstance(part, tuple) and part and isinstance(part[0], str)]


def _depth(tree: tuple) -> int:
    """How deep ``tree`` nests, found without recursion (a tree too deep to walk recursively is what it finds)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in _children(node))
    return deepest


@dataclass(frozen=True)
class Condition:
    """A parsed condition.

    Example::

        >>> Condition.parse("kernel == 'scan' and chunk > 64").evaluate({"kernel": "scan", "chunk": 128})
        True
    """

    text: str
    tree: tuple

    @classmethod
    def parse(cls, text: str) -> "Condition":
        if not isinstance(text, str):
            raise ConditionError(f"a condition must be a string, got {text!r}")
        try:
            tree = _Parser(text).parse()
        except RecursionError:  # the parser descends once per bracket or `not`
            tree = None
        # A chain (`a and b and ...`, `x + x + ...`) parses in a loop but nests: every walk of the tree would
        # descend past Python's recursion limit (500 terms did), when the space was read or a config judged.
        if tree is None or _depth(tree) > MAX_DEPTH:
            raise ConditionError(f"a condition nested too deeply (over {MAX_DEPTH} levels; a long list of "
                                 f"alternatives reads better as `name in [...]`): {text[:40]!r}...")
        return cls(text, tree)

    @cached_property
    def names(self) -> frozenset[str]:
        """The parameters this condition reads."""
        return frozenset(_names(self.tree))

    def evaluate(self, values: Mapping[str, Any]) -> bool:
        return _truth(self.tree, values)

    def never_equal(self, parameters: Mapping[str, Any]) -> str | None:
        """Why a test for equality here can never hold, or None: a value compared with a knob (``==``, ``!=``,
        ``in``) that it cannot take, as a misspelt choice (``messages == 'scna'``), which would silently leave a
        knob never active, or a constraint never judged. ``parameters`` maps a knob's name to its Parameter."""
        for name, value in _compared(self.tree):
            param = parameters.get(name)
            if param is not None and value is not None and not param.allows(value):  # null: an inactive knob
                return f"compares {name} with {value!r}, a value it never takes; allowed: {param.describe_allowed()}"
        return None


def _compared(node: tuple) -> Iterator[tuple[str, Any]]:
    """Each (knob name, literal) an equality or membership test in ``node`` compares."""
    if node[0] == "cmp" and node[1] in ("==", "!=", "in", "not in"):
        for side, other in ((node[2], node[3]), (node[3], node[2])):
            if side[0] == "name":
                if other[0] == "const":
                    yield side[1], other[1]
                elif other[0] == "list" and node[1] in ("in", "not in"):
                    yield from ((side[1], item[1]) for item in other[1] if item[0] == "const")
    for child in _children(node):
        yield from _compared(child)


def parse_constraints(raw: Any, parameters: Collection[str], capabilities: Collection[str], size: Collection[str],
                      fail: Callable[[str, str], SearchSpaceError]) -> list[Condition]:
    """A space file's ``constraints:``; each may read the knobs, a device capability (``cpu``, true where the
    device has it) and the size parameters the file lists under ``size_parameters``."""
    if not isinstance(raw, list):
        raise fail("constraints", "must be a list of expressions, e.g. - \"global_batch % batch_size == 0\"")
    constraints = []
    for index, text in enumerate(raw):
        try:
            constraint = Condition.parse(text)
        except SearchSpaceError as exc:
            raise fail(f"constraints[{index}]", str(exc)) from None
        unknown = constraint.names - set(parameters) - set(capabilities) - set(size)
        if unknown:
            raise fail(f"constraints[{index}]", f"names {', '.join(sorted(unknown))}, which is not a parameter, a "
                                                 "device capability or a size parameter (size_parameters)")
        constraints.append(constraint)
    return constraints


def values_named(space: Any) -> Any:
    """``space`` (a SearchSpace read from a file), once no condition or constraint tests a knob for a value it
    never takes (:meth:`Condition.never_equal`). Only a file is checked: a recorded space keeps the file's
    conditions over the values it measured, and those may leave out a value a condition names."""
    tested = [(f"parameters.{p.name}.condition", p.condition) for p in space.parameters.values() if p.condition]
    tested += [(f"constraints[{i}]", c) for i, c in enumerate(space.constraints) if isinstance(c, Condition)]
    for where, condition in tested:
        if problem := condition.never_equal(space.parameters):
            raise ConditionError(f"{space.source}: {where}: {problem}")
    return space


def size_read(names: Collection[str], size_parameters: Collection[str], facts: Mapping[str, Any]) -> str:
    """What a constraint reading ``names`` read of the size, said after it: `` (global_batch is 8 at this size)``."""
    read = [f"{name} is {show(facts[name])}" for name in size_parameters if name in names]
    return f" ({', '.join(read)} at this size)" if read else ""
