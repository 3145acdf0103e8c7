"""Reading the files a user writes by hand (space files, ``--config`` and export JSON) without losing a key.

YAML and JSON both keep the last of two equal keys in one mapping, silently: a second ``defaults:`` pasted
below the first, a knob declared twice, or ``{"dtype": "float32", "dtype": "float64"}`` ran with one value
and dropped the other. Here a key given twice is an error that names it. YAML 1.1's readings that no one writing
a space means are errors too (``on`` a boolean, ``16:9`` the number 969, ``064`` the number 52), and a number
with an exponent (``1e-3``) is the number, not the string YAML 1.1 made of it.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any

import yaml

__all__ = ["load_json", "load_yaml"]


class _OnceLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader, refusing a key given twice in one mapping."""


def _mapping_once(loader: _OnceLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}  # key -> its line
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *anchor" merges another mapping in: its keys may repeat
            continue
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)):
            continue
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"{key!r} is given twice (lines {seen[key]} and "
                                                    f"{key_node.start_mark.line + 1}); give each key once")
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=True)


def _boolean_as_written(loader: _OnceLoader, node: yaml.ScalarNode) -> bool:
    """A boolean spelt ``true`` or ``false``: YAML 1.1 also reads ``on``, ``off``, ``yes`` and ``no`` as booleans,
    so ``choices: [on, off]`` gave a workload True and False where it compared with "on", and the knob did nothing."""
    value = loader.construct_yaml_bool(node)
    if node.value.lower() not in ("true", "false"):
        raise yaml.constructor.ConstructorError(None, None, f"line {node.start_mark.line + 1}: {node.value} is read by "
                                                f"YAML as the boolean {str(value).lower()}: write {str(value).lower()} "
                                                f"for a boolean, or '{node.value}' in quotes for a word")
    return value


def _number_as_written(loader: _OnceLoader, node: yaml.ScalarNode) -> int | float:
    """A number as it reads: YAML 1.1 reads ``16:9`` in base 60 (969) and ``064`` in octal (52)."""
    construct = loader.construct_yaml_int if node.tag.endswith(":int") else loader.construct_yaml_float
    value = construct(node)
    if ":" in node.value or re.fullmatch(r"[-+]?0[0-7_]+", node.value):
        raise yaml.constructor.ConstructorError(None, None, f"line {node.start_mark.line + 1}: {node.value} is read by "
                                                f"YAML as the number {value}: write {value} for that number, or "
                                                f"'{node.value}' in quotes for a word")
    return value


_OnceLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_once)
_OnceLoader.add_constructor("tag:yaml.org,2002:bool", _boolean_as_written)
_OnceLoader.add_constructor("tag:yaml.org,2002:int", _number_as_written)
_OnceLoader.add_constructor("tag:yaml.org,2002:float", _number_as_written)
# A number with an exponent and no point (1e-3), or an unsigned exponent (1.0e3), is a number, as YAML 1.2 and
# JSON read it: YAML 1.1 read a string, so "low: 1e-5" was "not a number" and "choices: [1e-3, 1e-4]" were words.
_EXPONENT = re.compile(r"^[-+]?([0-9][0-9_]*(\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$")
_OnceLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT, list("-+.0123456789"))


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, but a key given twice in one mapping is a :class:`yaml.YAMLError`."""
    return copy.deepcopy(_parsed(text))  # the caller's own: a space built from it may keep and change its parts


@functools.lru_cache(maxsize=32)
def _parsed(text: str) -> Any:
    # Once per text: `load_config` reads its workload's space on every call, and PyYAML's parse of chmm's was 16 ms
    # of its 35 (this CPU); a script that asks for its config in a loop paid them each time.
    return yaml.load(text, Loader=_OnceLoader)  # noqa: S506 - a SafeLoader: plain data only


def _object_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"{key!r} is given twice in one object; give each key once")
        data[key] = value
    return data


def load_json(text: str) -> Any:
    """``json.loads(text)``, but a key given twice in one object is a ValueError that names it."""
    return json.loads(text, object_pairs_hook=_object_once)
