"""Run a workload (a built-in, or one of a file) in this process under a config, with or without a planted bug,
and check it."""

from __future__ import annotations

import contextlib
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping


from autotune.check import Check
from autotune.config import Config
from autotune.devices import resolve_device
from autotune.space import SearchSpace, load_space
from autotune.registry import get_workload_class
from autotune.workload import Workload
from tests.mutants import Mutant

#: The knob that names a workload's arithmetic precision.
PRECISION_KNOB = {"chmm": "dtype"}


def precision_knob(workload: str, space: SearchSpace | None = None) -> str:
    """A built-in's precision knob; for another workload, ``precision`` or else ``dtype``, where its ``space`` has
    one (a workload of one's own: the README's `distances` names it ``dtype``)."""
    if workload in PRECISION_KNOB or space is None:
        return PRECISION_KNOB.get(workload, "precision")
    return next((k for k in ("precision", "dtype") if k in space.parameters), "precision")


@dataclass
class Bench:
    """One workload at one size on the CPU, with its reference output computed once (without any bug)."""

    workload: Workload
    space: SearchSpace
    reference: Any

    @classmethod
    def open(cls, name: str, size: str = "tiny", cache_dir: str | Path | None = None,
             params: Mapping[str, Any] | None = None) -> "Bench":
        """``params`` overrides the size's parameters (another data seed, say)."""
        safe = re.sub(r"[^\w.-]", "_", name)  # a file's workload: path/to/mine.py:Mine
        cache = Path(cache_dir) if cache_dir is not None else Path(tempfile.mkdtemp(prefix=f"mutants-{safe}-"))
        workload = get_workload_class(name)(size, "cpu", cache)
        if params:
            workload.params = {**workload.params, **params}
        workload.prepare()
        # Every precision a CPU may offer: bf16 too, though this CPU emulates it (a check must hold wherever it runs).
        cpu = resolve_device("cpu").profile
        space = load_space(name).for_device(replace(cpu, capabilities=cpu.capabilities | {"bf16"}))
        space = space.for_size(workload.params, size)  # its constraints on the size's parameters, as a search's
        reference_config = space.reference
        reference = workload.to_reference(workload.build(reference_config)())
        return cls(workload, space, reference)

    @property
    def precision_knob(self) -> str:
        return precision_knob(self.workload.name, self.space)

    @property
    def precisions(self) -> list[Any]:
        """Every precision the CPU space offers."""
        knob = self.precision_knob
        return list(self.space.parameters[knob].choices)

    def config(self, values: Mapping[str, Any]) -> Config:
        """The baseline with ``values`` on top, validated by the space (a refused value raises here)."""
        return self.space.validate({**self.space.baseline, **values})

    def check(self, config: Config, mutant: Mutant | None = None) -> Check:
        """Build and run ``config`` once (with ``mutant`` planted) and check the output.

        A run that raises counts as caught: the trial would be recorded as
        ``error``, never ``ok``. The exception is kept in the metric's name.
        """
        plant = mutant.plant() if mutant is not None else contextlib.nullcontext()
        try:
            with plant:
                output = self.workload.build(config)()
                return self.workload.check(output, self.reference, config)
        except Exception as exc:  # noqa: BLE001 - a bug that crashes the run is caught
            if mutant is None:
                raise
            return Check(float("inf"), 0.0, False, f"raised {type(exc).__name__}", {})

    def mutant_config(self, mutant: Mutant, precision: Any) -> Config:
        return self.config({**mutant.config, self.precision_knob: precision})


def knob_values(bench: Bench) -> list[dict[str, Any]]:
    """One dict of knob values per value of each knob, on a base config where that knob is active."""
    space = bench.space
    bases = [dict(space.baseline), dict(space.defaults)]
    for other in space.parameters.values():
        if other.type == "categorical":
            bases += [{**space.baseline, other.name: c} for c in other.choices]
    found = []
    for param in space.parameters.values():
        if param.name in (bench.precision_knob, "compile"):
            continue  # precision is swept apart; compile takes minutes a value on this CPU
        values = list(param.choices) if param.type == "categorical" else sorted({param.low, param.high})
        for value in values:
            base = next((b for b in bases if space.is_active(param.name, {**b, param.name: value})), None)
            knobs = {**{k: v for k, v in (base or {}).items() if k != bench.precision_knob}, param.name: value}
            # Not one the space's constraints rule out at the size: a search never runs it (see Bench.open).
            if base is not None and space.violated(bench.config(knobs)) is None:
                found.append(knobs)
    return found
