"""A quick, always-correct workload with a wide space: for many workers on one study.

Its one knob, ``work``, takes any of a thousand values, so a study of tens of
trials has (almost) no repeats, and a run takes about ``work / 50`` ms.
"""

from __future__ import annotations

import time

from autotune.check import Check, relative_error
from autotune.workload import Workload


class SteadyWorkload(Workload):
    name = "steady"
    unit = "items"
    sizes = {"tiny": {}, "small": {}, "full": {}}
    default_size = "tiny"

    def build(self, config):
        # torch here, not at the top: a test's own autotune process then never imports it (4 s a command
        # on 2 cores); the runner's children have it from the fork server.
        import torch

        seconds = config["work"] / 50_000

        def run():
            time.sleep(seconds)
            return torch.arange(4, dtype=torch.float64)

        return run

    def items_per_run(self, config):
        return 100

    def check(self, output, reference, config):
        return Check.from_metrics({"value": (relative_error(output, reference), 1e-12)})
