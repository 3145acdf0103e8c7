"""Every outcome a trial can have is classified, and nothing is left running."""

import dataclasses
import json
import os
import re
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from autotune.config import Config
from autotune.runner import Runner, TrialRequest, TrialResult
from tests.conftest import BROKEN, FAST_MEASURER, fresh_process_json


def _request(cache: Path, behaviour: str, purpose: str = "trial") -> TrialRequest:
    return TrialRequest(BROKEN, "tiny", "cpu", "cpu", {"behaviour": behaviour}, str(cache), FAST_MEASURER, purpose=purpose)


@pytest.fixture(scope="module")
def cache(tmp_path_factory, runner):
    cache = tmp_path_factory.mktemp("broken-cache")
    assert runner.run(_request(cache, "ok", "reference")).status == "ok"
    return cache


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def in_trial_process(monkeypatch, tmp_path):
    """Run ``execute`` (what a trial's child runs) here, leaving this process's thread pools and numba folder as
    they are."""
    monkeypatch.setattr("autotune.runner.thread_pools", lambda threads: None)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))


#: How each behaviour of the broken workload ends: its status and a piece of its error.
OUTCOMES = [
    ("ok", "ok", None),
    ("wrong", "incorrect", "value error 1 > tolerance"),
    ("nan", "incorrect", "value error inf"),
    ("raise_build", "error", "ValueError: broken on purpose in build"),
    ("raise_run", "error", "RuntimeError: broken on purpose in run"),
    ("segfault", "crash", "SIGSEGV"),
    ("exit", "crash", "exited with status 3"),
    ("oom_torch", "oom", "DefaultCPUAllocator"),
    ("oom_numpy", "oom", "MemoryError"),
    # A workload's own mistakes, said in its author's words (before: 0 items/s "ok", and an AttributeError).
    ("no_items", "error", "ValueError: BrokenWorkload.items_per_run returned 0; it must be a positive number of "
                          "items a run"),
    ("bare_check", "error", "TypeError: BrokenWorkload.check returned a float; it must return an "
                            "autotune.check.Check"),
    # Raised by the workload, not Ctrl-C (a trial's process ignores it): "exited with status 70 without a result".
    ("keyboard", "error", "KeyboardInterrupt"),
]


@pytest.mark.parametrize("behaviour, status, fragment", OUTCOMES)
def test_outcome_is_classified(runner, cache, behaviour, status, fragment):
    result = runner.run(_request(cache, behaviour))
    assert result.status == status, result.error
    if fragment:
        assert fragment in (result.error or "")
    if status in ("ok", "incorrect"):
        assert result.throughput > 0 and result.check is not None
        # A wrong first output stops the measurement: more runs cannot make the config correct.
        assert len(result.times) >= 3 if status == "ok" else (result.cut_short and len(result.times) == 1)
        assert result.peak_memory_bytes > 0 and result.threads >= 1
    assert _gone(int((cache / "trial.pid").read_text()))


@pytest.mark.parametrize("behaviour, status, fragment", [o for o in OUTCOMES if o[0] not in ("segfault", "exit")])
def test_outcome_is_classified_in_a_trial_s_own_process(in_trial_process, cache,
                                                        monkeypatch, behaviour, status, fragment):
    # What a trial's child runs (execute), run here: each status as the child returns it, with what it measured.
    import signal

    from autotune.runner import execute

    monkeypatch.setattr(signal, "getsignal", lambda number: signal.SIG_IGN)  # as a trial's process ignores Ctrl-C
    result = TrialResult.from_dict(execute(_request(cache, behaviour)))
    assert (result.status, result.config) == (status, {"behaviour": behaviour}), result.error
    assert fragment is None or fragment in result.error
    assert 0 < result.wall_seconds < 60 and result.lost is None  # from the trial's start, not the clock's
    if status in ("ok", "incorrect"):
        assert result.unit == "items" and result.items_per_run == 8 and result.throughput > 0
        assert result.median_seconds == pytest.approx(result.items_per_run / result.throughput)
        assert result.build_seconds >= 0
        assert result.check["passed"] is (status == "ok") and result.environment and result.threads >= 1
        assert result.peak_memory_bytes > 0 and result.first_run_peak_memory_bytes > 0 and result.warmup_seconds > 0
        assert (result.error is None) is (status == "ok") and result.traceback is None
        assert len(result.times) >= 3 if status == "ok" else (result.cut_short and len(result.times) == 1)
    else:
        assert result.throughput is None and fragment in result.traceback and len(result.error) <= 500


def test_ctrl_c_in_a_trial_run_here_stops_the_search(in_trial_process, cache, monkeypatch):
    # --isolation inprocess: the user's Ctrl-C, not the workload's failure (a trial's own process ignores SIGINT).
    import signal

    from autotune.runner import execute

    # As Python sets it where SIGINT is not ignored (this test may run in the background, where it is).
    monkeypatch.setattr(signal, "getsignal", lambda number: signal.default_int_handler)
    with pytest.raises(KeyboardInterrupt):
        execute(_request(cache, "keyboard"))


def _steady_variant(folder: Path, old: str, new: str, *more: tuple[str, str]) -> str:
    """tests/workloads/steady.py with ``old`` replaced by ``new`` (and each ``(old, new)`` of ``more``), as a file
    workload in ``folder``."""
    steady = Path(BROKEN.split(":")[0]).parent / "steady"
    (folder / "variant.yaml").write_text(steady.with_suffix(".yaml").read_text())
    source = steady.with_suffix(".py").read_text()
    for was, now in ((old, new), *more):
        assert was in source
        source = source.replace(was, now)
    (folder / "variant.py").write_text(source)
    return f"{folder / 'variant.py'}:SteadyWorkload"


#: What a variant of the steady workload returns as its output, and where a method of its own may be added.
RETURNED, METHODS = "            return torch.arange(4, dtype=torch.float64)", "    def items_per_run(self, config):"


def _reference_then_trial(workload: str, folder: Path, runner: Runner | None = None, work: int = 1,
                          measurer: dict | None = None) -> tuple[TrialRequest, TrialResult]:
    """``workload``'s reference (it must pass), then a trial of the same config checked against it, by ``runner``
    (else in this process)."""
    runner = runner or Runner("inprocess")
    request = TrialRequest(workload, "tiny", "cpu", "cpu", {"work": work}, str(folder), measurer or FAST_MEASURER,
                           purpose="reference")
    reference = runner.run(request)
    assert reference.status == "ok", reference.error
    return request, runner.run(dataclasses.replace(request, purpose="trial"))


def _trial(runner, workload: str, folder: Path, work: int = 5, measurer: dict | None = None) -> TrialResult:
    """:func:`_reference_then_trial` by ``runner``: the trial's result."""
    return _reference_then_trial(workload, folder, runner, work, measurer)[1]


def test_a_trial_of_short_runs_times_them_in_blocks_and_says_how_many_ran(tmp_path):
    # Runs of 0.02 ms or so (sleeps), blocks of 5 ms: ten timings span the 0.05 s asked for, not 10 runs' 0.2 ms.
    from autotune.config import Config
    from autotune.console import run_text

    measurer = {**FAST_MEASURER, "max_runs": 10}
    result = _trial(Runner("inprocess"), f"{Path(BROKEN.split(':')[0]).parent / 'steady.py'}:SteadyWorkload",
                    tmp_path, work=1, measurer=measurer)
    assert result.status == "ok", result.error
    assert len(result.times) <= 10 and result.timed_runs >= 2 * len(result.times)
    assert sum(result.times) * result.timed_runs / len(result.times) >= 0.8 * measurer["min_time"]
    assert result.measurement().runs == result.timed_runs
    assert f"over {result.timed_runs:,} runs, spread" in run_text(result, Config(work=1), "steady", "cpu", "tiny")


def test_a_count_of_items_given_as_a_numpy_scalar_is_stored_as_a_number(tmp_path):
    # numpy.int64 from items_per_run carried into the throughput: the study's attributes and --json failed on it.
    workload = _steady_variant(tmp_path, "        return 100", "        import numpy\n        return numpy.int64(100)")
    runner = Runner("inprocess")
    result = _trial(runner, workload, tmp_path)
    assert result.status == "ok", result.error
    assert type(result.items_per_run) is int and type(result.throughput) is float
    json.dumps(result.to_dict())


def _peak_of_runs_allocating(runner, folder: Path, runs: str, device: str) -> TrialResult:
    """A trial of the steady workload whose runs where ``runs`` holds allocate 400 MiB."""
    allocate = ("numpy.ones(400 * 2**20 // 8).sum()" if device == "cpu"
                else "torch.ones(100 * 2**20, device='cuda').sum().item()")
    workload = _steady_variant(folder, "        def run():\n", f"""        calls = []

        def run():
            calls.append(1)
            if {runs}:
                import numpy
                {allocate}  # resident, freed at once
""")
    for purpose in ("reference", "trial"):
        result = runner.run(TrialRequest(workload, "tiny", device, device, {"work": 5}, str(folder), FAST_MEASURER,
                                         purpose=purpose))
        assert result.status == "ok", result.error
    return result


@pytest.mark.parametrize("runs, one_off", [("len(calls) == 1", True), ("True", False)])
def test_peak_memory_is_the_runs_not_a_first_run_s_one_off(runner, tmp_path, runs, one_off):
    # A compile's or cuDNN's first-call memory is as large as the caches are cold: ten's preset on the H200 read
    # 134.6 MiB on a cold compile cache, 74.2 MiB warm, its runs alike. 400 MiB on the first run only is left out
    # of the peak and kept as the first run's; on every run it is counted.
    from autotune.console import first_run_peak

    result = _peak_of_runs_allocating(runner, tmp_path, runs, "cpu")
    peak, first = result.peak_memory_bytes, result.first_run_peak_memory_bytes
    assert (peak < 400 * 2**20) is one_off and first >= 400 * 2**20, (peak / 2**20, first / 2**20)
    assert first_run_peak(result).startswith(" (its first run: ") is one_off


def _peak_mib_of_variant(runner, folder: Path, old: str, new: str) -> float:
    """The peak memory, in MiB, of a trial of the steady workload with ``old`` replaced by ``new`` (5 timed runs)."""
    folder.mkdir()
    workload = _steady_variant(folder, old, new)
    for purpose in ("reference", "trial"):
        result = runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 5}, str(folder),
                                         {**FAST_MEASURER, "min_runs": 5}, purpose=purpose))
        assert result.status == "ok", result.error
    return result.peak_memory_bytes / 2**20


def test_peak_memory_holds_one_output_not_the_reference_nor_the_last_run_s_output_as_well(runner, tmp_path):
    # A run whose output is 200 MiB read 774 MiB on a process of 171: the reference (the same size, loaded for the
    # whole trial) and the last timed run's output, held while the next run allocated its own, were in every peak.
    output = "            return torch.arange(4, dtype=torch.float64)\n"
    peaks = {mib: _peak_mib_of_variant(runner, tmp_path / str(mib), output,
                                       f"            return torch.ones({mib} * 2**20 // 8 + 4, dtype=torch.float64)\n")
             for mib in (0, 200)}
    assert 150 < peaks[200] - peaks[0] < 300, peaks


def test_memory_a_check_freed_is_not_in_the_runs_peak(runner, tmp_path):
    # Freed heap memory that malloc keeps (here 200 MB in 100 KB blocks under live ones) stayed resident, in the
    # peak of the runs after the check: chmm at `small` read 279-357 MiB for one config, 257-276 once handed back.
    check = "        return Check.from_metrics("
    peaks = {blocks: _peak_mib_of_variant(runner, tmp_path / str(blocks), check,
                                          "        import numpy\n        kept = self.__dict__.setdefault('kept', [])\n"
                                          "        held = [(numpy.ones(100_000 // 8), kept.append(bytearray(2000))) "
                                          f"for _ in range({blocks})]\n        del held\n" + check)
             for blocks in (0, 2000)}
    assert peaks[2000] - peaks[0] < 50, peaks


@pytest.mark.gpu
@pytest.mark.skipif(not os.path.exists("/dev/nvidia0"), reason="needs a CUDA device")
@pytest.mark.parametrize("runs, one_off", [("len(calls) == 1", True), ("True", False)])
def test_a_gpu_s_peak_memory_is_the_runs_not_a_first_run_s_one_off(runner, tmp_path, runs, one_off):
    result = _peak_of_runs_allocating(runner, tmp_path, runs, "cuda")  # the allocator's: the runs' 400 MiB or none
    assert (result.peak_memory_bytes < 100 * 2**20) is one_off, result.peak_memory_bytes / 2**20
    assert result.first_run_peak_memory_bytes >= 400 * 2**20


def test_a_build_s_time_is_kept_apart_from_the_first_run_s(runner, tmp_path):
    # What build(config) does once a job (vlm_mc's precompute: 0.96 s at `small`) was in no figure.
    from autotune.console import run_text

    workload = _steady_variant(tmp_path, "        def run():\n", "        time.sleep(0.3)\n\n        def run():\n")
    result = _trial(runner, workload, tmp_path)
    assert result.status == "ok" and 0.3 <= result.build_seconds < result.wall_seconds, result
    assert result.warmup_seconds < 0.3 and f", after a build of {result.build_seconds:.3g} s" in run_text(
        result, Config(result.config), "steady", "cpu", "tiny")


def test_a_trial_that_runs_long_is_said_to_run_and_still_killed_at_its_timeout(tmp_path, monkeypatch):
    # ten's cold compile at `small` (this CPU) ran 615 s, and a search said nothing meanwhile.
    import autotune._forkserver as forkserver
    from autotune.tuner import Tuner

    monkeypatch.setattr(forkserver, "WAIT_SAID", 0.3)
    workload = _steady_variant(tmp_path, "        def run():\n", "        time.sleep(1.2)\n\n        def run():\n")
    said = []
    tuner = Tuner(workload, "cpu", "tiny", studies=tmp_path / "studies", measurer=FAST_MEASURER, trial_timeout=30,
                  on_stage=said.append)
    try:
        tuner.ensure_reference()
        assert tuner.run_config({"work": 5}).status == "ok"
        waits = [line for line in said if line.startswith("trial still running after ")]
        assert 2 <= len(waits) <= 6 and waits[0].endswith("(a first run that compiles can take minutes): work=5"), said
        # The words do not stop the clock: a trial past its timeout is killed at it.
        started = time.perf_counter()
        result = tuner.runner.run(tuner.request(Config({"work": 5})), timeout=0.5)
        assert result.status == "timeout" and time.perf_counter() - started < 5, result
        # Nor do words that fail (a message of a config it cannot describe) end the trial.
        tuner.runner.on_wait = lambda request, seconds: 1 / 0
        assert tuner.runner.run(tuner.request(Config({"work": 5}))).status == "ok"
    finally:
        tuner.close()


def test_a_config_whose_check_passes_a_plainly_wrong_output_fails(runner, tmp_path):
    # A tuner finds any wrong output its check passes: a tolerance a typo made 1e3 under one config ("work" below
    # 100, the fastest) passed any output of it, a wrong one too ("ok" before). Now its trial fails, saying why.
    workload = _steady_variant(tmp_path, "(relative_error(output, reference), 1e-12)",
                               "(relative_error(output, reference), 1e3 if config['work'] < 100 else 1e-12)")
    results = {}
    for purpose, work in (("reference", 500), ("trial", 500), ("trial", 50)):
        results[work] = runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": work}, str(tmp_path),
                                                FAST_MEASURER, purpose=purpose))
    assert results[500].status == "ok", results[500].error
    assert results[50].status == "error" and results[50].error.startswith(
        "ValueError: SteadyWorkload.check passed a plainly wrong output under this config (the first run's, each "
        "float doubled plus one and reversed; value 2.24 <= tolerance 1e+03)"), results[50].error


def test_a_last_output_that_fails_where_the_first_passed_says_so(runner, tmp_path):
    # A run that changes what the next one reads (a weight updated in place, a reused buffer): its first output
    # passed, its last failed, and the error said only "output differs from the reference".
    workload = _steady_variant(tmp_path, "        def run():\n            time.sleep(seconds)\n"
                               "            return torch.arange(4, dtype=torch.float64)\n",
                               "        calls = []\n\n        def run():\n            calls.append(1)\n"
                               "            return torch.arange(4, dtype=torch.float64) * len(calls)\n")
    result = _trial(runner, workload, tmp_path)
    assert result.status == "incorrect" and result.error.startswith(
        "output differs from the reference at a later run (the first run's passed: does a run change what the "
        "next one reads?): value error "), result.error


#: What a check leaves behind, and what its runs meet: its module's header, then the first lines of its run and its
#: check. A check's np.linalg.norm woke OpenBLAS's threads, which spin a tenth of a second after it on the cores the
#: runs timed next need (a 0.26 ms run's mean twice its median, this CPU): here it leaves a thread spinning 0.1 s
#: (hashing, the GIL let go), and a run beside it raises. The first collection in a trial's runs walked every object
#: its build and checks had made (2.7-3.2 ms in each trial of my micro-batch gradient, whose runs took 40 us): here
#: the check leaves 20,000 objects young, and the first warm-up run raises where a collection is still to walk them,
#: or where the fork server's objects are not frozen out of its collections (a full one walked them: 88-159 ms).
LEFT_BEHIND = {
    "a spinning thread": (
        "import hashlib\nimport threading\nimport time\n\nBEGUN, DONE = threading.Event(), threading.Event()\n\n\n"
        "def _spin():\n    data = bytes(2**27)\n    BEGUN.set()\n    hashlib.sha256(data).digest()\n    DONE.set()\n",
        "            if BEGUN.is_set() and not DONE.wait(0.01):\n"
        "                raise RuntimeError('run beside the thread the check left spinning')\n",
        "        if not BEGUN.is_set():\n            threading.Thread(target=_spin, daemon=True).start()\n"
        "            BEGUN.wait()\n"),
    "young objects": (
        "import gc\nimport time\n\nKEPT = []\nCALLS = []\n",
        "            CALLS.append(gc.get_count())\n"
        "            if len(CALLS) == 2 and CALLS[1][1:] != (0, 0):\n"
        "                raise RuntimeError(f'young generations at the warm-up: {CALLS[1]}')\n"
        "            if gc.get_freeze_count() < 10_000:\n"
        "                raise RuntimeError(f'{gc.get_freeze_count()} objects frozen')\n",
        "        gc.disable()\n        KEPT.append([[] for _ in range(20_000)])\n        gc.enable()\n"),
}


@pytest.mark.parametrize("left", LEFT_BEHIND)
def test_the_runs_timed_after_a_check_meet_nothing_it_left_behind(runner, tmp_path, left):
    header, run_starts, check_starts = LEFT_BEHIND[left]
    run, check = "        def run():\n", "    def check(self, output, reference, config):\n"
    workload = _steady_variant(tmp_path, "import time\n", header, (run, run + run_starts),
                               (check, check + check_starts))
    result = _trial(runner, workload, tmp_path)
    assert result.status == "ok", result.error


@pytest.mark.parametrize("draw, named", [("torch.rand(4, dtype=torch.float64)", "torch's"),
                                         ("torch.tensor(__import__('numpy').random.rand(4))", "numpy's"),
                                         ("torch.tensor([__import__('random').random()] * 4)", "Python's")])
def test_a_later_output_that_fails_as_its_run_drew_new_random_numbers_says_which_generator(runner, tmp_path, draw,
                                                                                           named):
    # Dropout in training mode in a block of mine: each trial seeds torch before its build as the reference's did, so
    # its first run passed and a later one failed, said as "does a run change what the next one reads?" and no word of
    # the dropout. A run that seeds the generator where it starts is not named: its state is the same after each run.
    drawn = f"            return torch.arange(4, dtype=torch.float64) + {draw}\n"
    for seeded in ("", "            __import__('random').seed(0); __import__('numpy').random.seed(0); "
                       "torch.manual_seed(0)\n"):
        workload = _steady_variant(tmp_path, RETURNED + "\n", seeded + drawn)
        for purpose in ("reference", "trial"):
            result = runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 5}, str(tmp_path),
                                             FAST_MEASURER, purpose=purpose))
        if seeded:
            assert result.status == "ok", result.error
            continue
        assert result.status == "incorrect" and result.error.startswith(
            f"output differs from the reference at a later run (the first run's passed: each run draws new numbers "
            f"from {named} global random generator: seed it where the run starts, or draw from a generator the run "
            "seeds itself): value error "), result.error


def test_an_output_wrong_after_the_last_timed_run_fails_the_trial(runner, tmp_path):
    # Its outputs go wrong once checked three times (the first run's, its negative control, the last timed run's):
    # the trial passed, as one wrong one run in five passed two times in three. Now untimed runs after the timed
    # ones are checked too.
    workload = _steady_variant(tmp_path, "        return Check.from_metrics(",
                               "        import torch\n        self.__dict__.setdefault('checked', []).append(1)\n"
                               "        if len(self.checked) > 3:\n            output = output * 2\n"
                               "        return Check.from_metrics(")
    measurer = {**FAST_MEASURER, "check_share": 1.0}
    result = _trial(runner, workload, tmp_path, 500, measurer=measurer)
    assert result.status == "incorrect" and not result.cut_short, result
    assert result.error.startswith("output differs from the reference at a later run"), result.error


@pytest.mark.parametrize("lands_at", ["its own synchronize", "the device's wait"])
def test_the_reference_is_saved_once_the_wait_its_work_lands_at_has_run(tmp_path, monkeypatch, lands_at):
    # A run that returns before its work is done (a GPU's queued kernels). Here the work lands at the workload's own
    # synchronize, or at the device's wait alone (patched in: a CPU has none), the workload's own waiting for its
    # stream alone (here for nothing). A reference saved before it landed held what the output was before, and
    # every trial, timed and checked as the measurer waits for both (workload.synchronizer), failed against it.
    import torch

    from autotune.workload import Workload

    if lands_at == "the device's wait":
        monkeypatch.setattr(Workload, "synchronize", lambda self: self.land())
    own = "self.land()" if lands_at == "its own synchronize" else "pass"
    land = ("    def land(self):\n        import torch\n\n        if getattr(self, 'pending', None) is not None:\n"
            "            self.pending.copy_(torch.arange(4, dtype=torch.float64))\n\n")
    pending = "            self.pending = torch.zeros(4, dtype=torch.float64)\n            return self.pending"
    workload = _steady_variant(tmp_path, RETURNED, pending,
                               (METHODS, f"{land}    def synchronize(self):\n        {own}\n\n{METHODS}"))
    request, trial = _reference_then_trial(workload, tmp_path)
    assert torch.equal(torch.load(request.reference_path, weights_only=True), torch.arange(4, dtype=torch.float64))
    assert trial.status == "ok", trial.error


@pytest.mark.parametrize("drawn", ["torch.rand(4, dtype=torch.float64)", "torch.from_numpy(numpy.random.rand(4))"])
def test_each_trial_starts_from_the_same_seeds_so_a_workload_s_random_data_is_the_reference_s(tmp_path, drawn):
    # Data drawn from torch's or numpy's global generator (a model initialised, inputs made up) is the same in the
    # reference and in every trial, however many draws came before in its process (here, the runner in process,
    # this test's own).
    drawn_once = f"        import numpy\n\n        drawn = {drawn}\n\n        def run():"  # a build's, as weights are
    workload = _steady_variant(tmp_path, RETURNED, "            return drawn", ("        def run():", drawn_once))
    trial = _reference_then_trial(workload, tmp_path)[1]
    assert trial.status == "ok", trial.error


def test_a_workload_s_prepare_runs_before_its_build_and_outside_the_build_s_time(tmp_path):
    # prepare() makes the data once (chmm's sequences, ten's tokens); the build's time is the config's own cost.
    workload = _steady_variant(tmp_path, RETURNED, "            return self.made", (METHODS, (
        "    def prepare(self):\n        import torch\n\n        time.sleep(0.5)\n"
        f"        self.made = torch.arange(4, dtype=torch.float64)\n\n{METHODS}")))
    trial = _reference_then_trial(workload, tmp_path)[1]
    assert trial.status == "ok" and trial.build_seconds < 0.25, (trial.error, trial.build_seconds)


def test_a_build_that_returns_no_run_says_so(tmp_path):
    # Before: "TypeError: 'NoneType' object is not callable", with no word of build.
    workload = _steady_variant(tmp_path, "        return run\n", "        return None\n")
    request = TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 1}, str(tmp_path), FAST_MEASURER,
                           purpose="reference")
    result = Runner("inprocess").run(request)
    assert result.status == "error" and result.error == ("TypeError: SteadyWorkload.build returned None; it must "
                                                         "return the run: a function of no arguments that does "
                                                         "the work once"), result.error
    # A run that needs an argument: "<lambda>() missing 1 required positional argument: 'x'", no word of build.
    (tmp_path / "args").mkdir()
    workload = _steady_variant(tmp_path / "args", "        return run\n", "        return lambda x, *rest: run()\n")
    request = TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 1}, str(tmp_path), FAST_MEASURER,
                           purpose="reference")
    result = Runner("inprocess").run(request)
    said = "TypeError: SteadyWorkload.build returned a function that takes (x, *rest); it must return the run"
    assert result.status == "error" and result.error.startswith(said), result.error


def test_a_run_whose_signature_cannot_be_read_is_called_as_it_is():
    # Some builtins have none to read (inspect raises ValueError for max): only calling one can tell.
    from autotune.workload import not_a_run

    assert (not_a_run(max), not_a_run(lambda x: x)) == ("", "a function that takes (x)")


@pytest.mark.parametrize("output, held", [
    ("{'x': [numpy.arange(4.0)]}", "a numpy.ndarray (output['x'][0])"),
    # A float all the same, which torch cannot load: a Monte-Carlo pi of mine was told "a value torch cannot load".
    ("numpy.float64(3.14)", "a numpy.float64 (output)"),
    # A generator (a run() that yields) cannot be saved at all: it failed with pickle's words, naming no cause.
    ("(x for x in [torch.ones(2)])", "a builtins.generator (output)"),
])
def test_a_reference_output_that_is_not_plain_tensor_data_fails_the_reference_and_says_why(tmp_path, output, held):
    # Before: written anyway, then every trial failed with torch's "Weights only load failed".
    workload = _steady_variant(tmp_path, "            return torch.arange(4, dtype=torch.float64)",
                               f"            import numpy\n            return {output}")
    request = TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 1}, str(tmp_path), FAST_MEASURER,
                           purpose="reference")
    result = Runner("inprocess").run(request)
    assert result.status == "error" and result.error.startswith(
        f"TypeError: SteadyWorkload's reference output holds {held}, which a reference file cannot")
    assert not request.reference_path.exists() and not list(tmp_path.glob("*.tmp"))


def test_a_reference_output_the_disk_does_not_take_says_so_not_that_its_type_is_wrong(tmp_path, monkeypatch):
    # A search on a full disk (a 300 KiB tmpfs, this machine) said chmm's reference "holds a value torch cannot
    # load ... return tensors": torch.save's words there are "[enforce fail at inline_container.cc:672] .
    # unexpected pos 135680 vs 135568".
    import torch

    def full(value, path):
        Path(path).write_bytes(b"PK")  # what a full disk leaves
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")

    monkeypatch.setattr(torch, "save", full)
    steady = f"{Path(BROKEN.split(':')[0]).parent / 'steady.py'}:SteadyWorkload"
    request = TrialRequest(steady, "tiny", "cpu", "cpu", {"work": 1}, str(tmp_path), FAST_MEASURER,
                           purpose="reference")
    result = Runner("inprocess").run(request)
    assert result.status == "error" and result.error.startswith(
        f"OSError: SteadyWorkload's reference output (0.00 MiB of tensors) could not be written to {tmp_path} (")
    assert result.error.endswith("MiB free there): RuntimeError: [enforce fail at inline_container.cc:672] . "
                                 "unexpected pos 576 vs 534"), result.error
    assert not request.reference_path.exists() and not list(tmp_path.glob("*.tmp"))


def test_a_reference_the_disk_refused_says_how_large_it_was_and_how_much_room_there_was(tmp_path, monkeypatch):
    # torch.save may fail before it makes the file: removing the file it never made must not replace the cause.
    import collections
    import shutil

    import torch

    from autotune.reference import save

    def refused(value, path):
        raise RuntimeError("unexpected pos 576 vs 534")

    monkeypatch.setattr(torch, "save", refused)
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: usage(2**30, 2**30 - 3 * 2**19, 3 * 2**19))
    with pytest.raises(OSError) as failed:
        save(SimpleNamespace(), {"a": torch.zeros(2**18), "b": [torch.zeros(2**17, dtype=torch.float64)]},
             tmp_path / "reference.pt")
    assert str(failed.value) == (f"SimpleNamespace's reference output (2.00 MiB of tensors) could not be written to "
                                 f"{tmp_path} (1.50 MiB free there): RuntimeError: unexpected pos 576 vs 534")
    assert list(tmp_path.iterdir()) == []

    def unmeasured(folder):  # the free space cannot be read either (statvfs failed)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(shutil, "disk_usage", unmeasured)
    with pytest.raises(OSError, match=r"could not be written to .* \(\? MiB free there\): RuntimeError: unexpected"):
        save(SimpleNamespace(), {"a": torch.zeros(4)}, tmp_path / "reference.pt")


def test_a_reference_saved_but_not_loadable_is_its_type_not_the_disk(tmp_path, monkeypatch):
    import torch

    from autotune.reference import save

    def unloadable(path, **kwargs):
        raise RuntimeError("Weights only load failed")

    monkeypatch.setattr(torch, "load", unloadable)
    with pytest.raises(TypeError, match="^SimpleNamespace's reference output holds a value torch cannot load, which"):
        save(SimpleNamespace(), torch.ones(2), tmp_path / "reference.pt")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("output, error, said", [
    # A dict's keys are saved too: a key no trial can load, or a NaN key, is named as a value would be.
    ({frozenset({1}): 0}, TypeError, "holds a builtins.frozenset (output key frozenset({1})), which a reference file "
                                     "cannot"),
    ({float("nan"): 0}, ValueError, "holds NaN (output key nan)"),
])
def test_a_reference_s_dict_keys_are_checked_as_its_values_are(tmp_path, output, error, said):
    from autotune.reference import save

    with pytest.raises(error, match=re.escape(said)):
        save(SimpleNamespace(), output, tmp_path / "reference.pt")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("output, where", [
    ("torch.tensor([1.0, float('nan'), 3.0])", "output: 1 of 3 values"),
    ("{'counts': [torch.ones(2), torch.full((2, 2), float('nan'))]}", "output['counts'][1]: 4 of 4 values"),
    ("(torch.tensor([1j, complex('nan')]), 2.0)", "output[0]: 1 of 2 values"),
    ("{'loss': float('nan')}", "output['loss']"),
])
def test_a_reference_output_holding_nan_fails_the_reference_and_says_where(tmp_path, output, where):
    # Before: kept, then every trial failed "value error inf", and a check that lets NaN through passed any NaN.
    workload = _steady_variant(tmp_path, "            return torch.arange(4, dtype=torch.float64)",
                               f"            return {output}")
    request = TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 1}, str(tmp_path), FAST_MEASURER,
                           purpose="reference")
    result = Runner("inprocess").run(request)
    assert result.status == "error" and result.error == (
        f"ValueError: SteadyWorkload's reference output holds NaN ({where}): no output can be checked against it; "
        "fix the reference config (the space file's reference:) or the workload")
    assert not request.reference_path.exists() and not list(tmp_path.glob("*.tmp"))


def test_a_reference_output_with_infinities_and_integers_is_kept(tmp_path):
    # -inf is an honest log-probability, and integers cannot be NaN.
    workload = _steady_variant(tmp_path, "            return torch.arange(4, dtype=torch.float64)",
                               "            return {'log_p': torch.tensor([0.0, float('-inf')]), 'n': torch.arange(3)}")
    request = TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 1}, str(tmp_path), FAST_MEASURER,
                           purpose="reference")
    assert Runner("inprocess").run(request).status == "ok" and request.reference_path.is_file()


def test_a_count_of_items_no_throughput_can_divide_fails_trials_not_the_reference(runner, tmp_path):
    # The reference's run is not timed: a workload whose count is 0 there still gets its reference.
    assert runner.run(_request(tmp_path, "no_items", "reference")).status == "ok"
    assert runner.run(_request(tmp_path, "no_items")).status == "error"


def test_hang_times_out_and_its_whole_process_group_is_killed(cache):
    runner = Runner(timeout=3)
    try:
        started = time.perf_counter()
        result = runner.run(_request(cache, "hang"))
        assert result.status == "timeout" and "3 s trial timeout" in result.error
        assert time.perf_counter() - started < 30
        assert _gone(int((cache / "trial.pid").read_text()))
        assert _gone(int((cache / "grandchild.pid").read_text()))
        # The server is still usable after a kill.
        assert runner.run(_request(cache, "ok")).status == "ok"
    finally:
        runner.close()


def test_trials_do_not_share_a_process(runner, cache):
    pids = set()
    for _ in range(3):
        assert runner.run(_request(cache, "ok")).status == "ok"
        pids.add((cache / "trial.pid").read_text())
    assert len(pids) == 3 and str(os.getpid()) not in pids


def test_inprocess_isolation_runs_here(cache):
    result = Runner("inprocess").run(_request(cache, "wrong"))
    assert result.status == "incorrect"
    assert (cache / "trial.pid").read_text() == str(os.getpid())


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="cores are read from /proc (Linux)")
def test_a_trial_records_the_cores_other_work_and_its_own_kept_busy(runner, cache):
    # A candidate timed beside other work is re-measured, one whose threads borrowed cores is said to have: a
    # measurer made without its meter recorded neither, and every trial read quiet. Its own cores are read over
    # half a second of runs or more (environment.OWN_TICKS).
    request = dataclasses.replace(_request(cache, "ok"), measurer={**FAST_MEASURER, "min_time": 0.6})
    result = runner.run(request)
    assert result.status == "ok" and result.busy_elsewhere is not None and result.cores_used is not None
    assert result.busy_elsewhere >= 0 and result.cores_used >= 0


def test_a_measurer_s_noise_threshold_judges_its_rounds_pooled_too(cache):
    # A Tuner's measurer may set how wide a spread is noisy; the search's trial was judged by it, and the winner's
    # rounds pooled (the export's "noisy", the table's "(noisy)") by the default 0.1 where the result kept no word
    # of it.
    from autotune.selection import Candidate

    request = dataclasses.replace(_request(cache, "ok"), measurer={**FAST_MEASURER, "noisy_threshold": 0.0})
    rounds = [Runner("inprocess").run(request) for _ in range(2)]
    assert [r.noisy for r in rounds] == [True, True]  # any spread at all, where 0.1 would find these quiet
    assert Candidate(Config(request.config), 0, "candidate", rounds).figures()["noisy"] is True


class _Planted:
    """What an attacker pickles into a reference file: unpickling it runs a command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_reference_file_runs_no_code_and_is_recomputed(studies, tmp_path):
    import torch

    from tests.conftest import run_cli

    from autotune.tuner import Tuner

    tuner = Tuner(BROKEN, "cpu", "tiny", studies=studies)
    try:
        planted = tuner.request(tuner.reference_config, "reference").reference_path
    finally:
        tuner.close()
    assert planted.name.startswith("reference-cpu-")  # named by the reference config (the next test)
    planted.parent.mkdir(parents=True)
    marker = tmp_path / "pwned"
    torch.save(_Planted(marker), planted)
    done = run_cli("run", "-w", BROKEN, "-d", "cpu", "-s", "tiny", "--min-time", "0.05", cwd=tmp_path,
                   env={"AUTOTUNE_STUDIES": str(studies)}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists()
    assert "not plain tensor data" in done.stderr and "computing it again" in done.stderr
    assert torch.load(planted, weights_only=True) is not None


def test_the_reference_file_is_named_by_the_reference_config(tmp_path):
    # A reference edited in the space file (float64 where float32 was too coarse, another kernel where one was
    # wrong) was read from the cache computed with the old one, and every config checked against that.
    first = TrialRequest(BROKEN, "tiny", "cpu", "cpu", {"behaviour": "fast"}, str(tmp_path), reference={"x": 1})
    edited = dataclasses.replace(first, reference={"x": 2})
    assert first.reference_path != edited.reference_path and first.reference_path.parent == tmp_path
    assert first.reference_path == dataclasses.replace(first, config={"behaviour": "ok"}).reference_path
    assert first.reference_path.name.startswith("reference-cpu-")


def test_a_cached_reference_is_checked_without_the_trial_timeout(tmp_path):
    # Its check is a load in a child, no trial: under a trial timeout shorter than the load it was thrown away
    # ("not plain tensor data ... ran past the 0.001 s trial timeout") and computed again.
    import warnings

    from autotune.tuner import Tuner

    tuner = Tuner(BROKEN, "cpu", "tiny", studies=tmp_path, trial_timeout=0.001)
    try:
        tuner.ensure_reference()
        reference = tuner.request(tuner.reference_config, "reference").reference_path
        written = reference.stat().st_mtime_ns
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tuner.ensure_reference()
    finally:
        tuner.close()
    assert reference.stat().st_mtime_ns == written


def test_a_cpu_run_imports_torch_only_in_the_runner_s_children(tmp_path):
    # The process that tunes only reads a built-in's facts and its space, and hands the workload to the runner:
    # torch (3.5 s to import on a slow 2-core CPU) loads there, once, in the fork server. Taken before: the
    # workload's import, resolving --device cpu, the cached reference's check and a result's TorchVersion.
    from tests.conftest import fresh_process_json

    script = ("import json, pathlib, sys\n"
              "from autotune.cli import main\n"
              "said = []\n"
              "for extra in ([], [], ['--set', 'colour=red']):\n"  # the reference computed, then found cached
              "    try:\n"
              "        main(['run', '-w', 'chmm', '-d', 'cpu', '-s', 'tiny', '--min-time', '0.05', *extra])\n"
              "    except SystemExit as exit:\n"
              "        written = [p.stat().st_mtime_ns for p in pathlib.Path('studies').rglob('reference-*.pt')]\n"
              "        said.append([exit.code, 'torch' in sys.modules, written])\n"
              "print(json.dumps(said))\n")
    said = fresh_process_json(script, cwd=tmp_path, env={"AUTOTUNE_STUDIES": str(tmp_path / "studies")}, timeout=300)
    assert [run[:2] for run in said] == [[0, False], [0, False], [2, False]]
    assert len(said[0][2]) == 1 and said[0][2] == said[1][2]  # the second run checked the cached reference, kept it


@pytest.mark.parametrize("message, oom", [
    ("CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", True),
    ("CUDA error: out of memory", True),
    ("CUDA error: an illegal memory access was encountered", False),  # sticky: not a memory shortage
    ("FlashAttention only supports fp16 and bf16", False),
])
def test_a_cuda_runtime_error_is_oom_only_when_it_says_so(message, oom):
    import torch

    from autotune.runner import _is_out_of_memory

    assert _is_out_of_memory(RuntimeError(message), "cuda") is oom
    assert _is_out_of_memory(torch.OutOfMemoryError(message), "cuda")  # the caching allocator's: by its type
    assert _is_out_of_memory(MemoryError(message), "cuda")


def test_an_address_space_limit_is_seen_where_one_is_set():
    import resource

    from autotune.runner import _address_space_capped

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY or hard != resource.RLIM_INFINITY:
        pytest.skip("this process runs under an address-space limit already")
    assert not _address_space_capped()
    resource.setrlimit(resource.RLIMIT_AS, (1 << 44, hard))  # 16 TiB: nothing here comes near it
    try:
        assert _address_space_capped()
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_a_memory_limit_below_what_a_trial_starts_with_is_an_oom_that_says_so(runner, cache):
    """Forked from the server, a trial starts with torch mapped (629 MiB on this CPU): under a lower
    --memory-limit it failed as an `error` ImportError from numpy, which did not say why."""
    import dataclasses

    result = runner.run(dataclasses.replace(_request(cache, "ok"), memory_limit_bytes=64 << 20))
    assert result.status == "oom"
    assert "--memory-limit 64 MiB is below the" in result.error and "raise it" in result.error
    mapped = int(re.search(r"below the (\d+) MiB a trial maps", result.error)[1])
    assert 64 < mapped < 64 * 1024  # torch and its libraries: hundreds of MiB (629 on this CPU)


def test_a_library_that_cannot_be_mapped_is_oom_only_under_a_memory_limit(monkeypatch):
    import autotune.runner as runner_module

    failure = ImportError("/x/_bounded_integers.so: failed to map segment from shared object")
    monkeypatch.setattr(runner_module, "_address_space_capped", lambda: True)
    assert runner_module._is_out_of_memory(failure, "cpu")
    monkeypatch.setattr(runner_module, "_address_space_capped", lambda: False)
    assert not runner_module._is_out_of_memory(failure, "cpu")  # e.g. a noexec mount: a plain error
    assert not runner_module._is_out_of_memory(ImportError("No module named 'numba'"), "cpu")


def _inductor_settings():
    return {name: os.environ.get(name) for name in ("TORCHINDUCTOR_MAX_AUTOTUNE_REPORT_CHOICES_STATS",
                                                    "TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED")}


def test_trials_do_not_print_inductors_kernel_timings_unless_the_user_asks(monkeypatch):
    # vlm_mc's compile=max-autotune printed Inductor's tables amid the progress lines.
    from autotune._forkserver import ForkServer

    for name in _inductor_settings():
        monkeypatch.delenv(name, raising=False)
    server = ForkServer()
    try:
        seen, exitcode, timed_out = server.call(_inductor_settings, (), timeout=60)
    finally:
        server.close()
    assert (exitcode, timed_out) == (0, False) and set(seen.values()) == {"0"}
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE_REPORT_CHOICES_STATS", "1")
    server = ForkServer()
    try:
        seen, _, _ = server.call(_inductor_settings, (), timeout=60)
    finally:
        server.close()
    assert seen["TORCHINDUCTOR_MAX_AUTOTUNE_REPORT_CHOICES_STATS"] == "1"


def _chatter() -> str:
    print("from print")  # Python's stdout
    os.write(1, b"from fd 1\n")  # what a C library writes
    return "result"


def test_what_a_trial_prints_goes_to_stderr_never_to_stdout_where_json_goes(capfd, monkeypatch):
    # A workload that printed each step made `autotune search --json` unparseable.
    from autotune._forkserver import ForkServer

    server = ForkServer()  # started here, so it writes to this test's captured descriptors
    try:
        assert server.call(_chatter, (), timeout=60)[0] == "result"
    finally:
        server.close()
    out, err = capfd.readouterr()
    assert "from" not in out and "from print" in err and "from fd 1" in err
    monkeypatch.setattr("autotune.runner.execute", lambda request: {"chatter": _chatter()})
    monkeypatch.setattr("autotune.runner.TrialResult.from_dict", lambda data: data)
    assert Runner("inprocess").run(None) == {"chatter": "result"}
    out, err = capfd.readouterr()
    assert "from print" not in out and "from print" in err  # in-process: Python's prints (fd 1 is the tuner's own)


def _servers_of_this_process() -> list[psutil.Process]:
    return [p for p in psutil.Process().children() if "autotune._forkserver" in " ".join(p.cmdline())]


def test_a_search_starts_its_fork_server_before_it_imports_the_workload_and_kills_it_when_done(tmp_path):
    # The server imported torch only once the search had imported its workload (torch too): two imports of
    # seconds one after the other, where two cores can run them side by side. And it was asked to leave at
    # the end, which a process with torch loaded takes most of a second to do.
    import signal

    from autotune.settings import SearchSettings

    before = _servers_of_this_process()
    tuner = SearchSettings("chmm", "cpu", "tiny", studies=str(tmp_path)).tuner()
    try:
        started = [p for p in _servers_of_this_process() if p not in before]
        assert len(started) == 1  # spawned by the constructor, before any trial asked for it
        assert tuner.runner.warm_up() > 0 and tuner.runner.server.call(os.getpid, (), 60)[1] == 0
    finally:
        process = tuner.runner.server._process
        tuner.close()
    assert process is not None and process.returncode == -signal.SIGKILL
    assert _servers_of_this_process() == before
    with SearchSettings("chmm", "cpu", "tiny", studies=str(tmp_path)).tuner() as tuner:  # a script's way
        process = tuner.runner.server._process
    assert process.wait(timeout=30) == -signal.SIGKILL and _servers_of_this_process() == before


@pytest.mark.parametrize("preload, said", [
    # A broken torch install (a shim raising ImportError, this machine): `autotune run` printed the server's
    # traceback and then its own, a RuntimeError "the fork server failed to start (see the error above)", exit 1.
    ("raise ImportError('libtorch_cpu.so: cannot open shared object')\n",
     r"the fork server, which every trial forks from, failed to start: importing broken_preload: ImportError: "
     r"libtorch_cpu.so: cannot open shared object; check that `.*python.* -c 'import torch'` works"),
    # Killed as it imports (the OOM killer, a segfault in a library): no word comes back, its pipe just closes.
    ("import os\nos._exit(9)\n", r"failed to start: it exited \(see the error above\); check that "),
], ids=["cannot import", "dies unheard"])
def test_a_fork_server_that_fails_to_import_its_preload_is_one_line_naming_the_cause(tmp_path, monkeypatch, preload,
                                                                                     said):
    from autotune._forkserver import ForkServer, ServerFailed

    (tmp_path / "broken_preload.py").write_text(preload)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    server = ForkServer(["broken_preload"])
    try:
        server.start()
        with pytest.raises(ServerFailed, match=said):
            server.wait_ready()
    finally:
        server.close()


def test_a_fork_server_slow_to_start_is_said_to_be_starting_and_one_that_hangs_fails_at_the_trial_timeout(
        tmp_path, monkeypatch):
    # An import of torch stuck on a network file system (a sitecustomize that sleeps, this CPU): the search said
    # "study ... (0 trials so far)" and then nothing, for as long as the import took, or for ever.
    from autotune import _forkserver
    from autotune._forkserver import ForkServer, ServerFailed

    (tmp_path / "slow_preload.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setattr(_forkserver, "STARTING_SAID", 0.5)
    monkeypatch.setattr(_forkserver, "WAIT_SAID", 0.5)
    said = []
    server = ForkServer(["slow_preload"], start_timeout=2.5, on_start_wait=said.append)
    try:
        server.start()
        process = server._process
        started = time.monotonic()
        with pytest.raises(ServerFailed, match=r"the fork server, which every trial forks from, did not start within "
                                               r"2.5 s \(it imports torch and the workloads\); check that "
                                               r"`.*python.* -c 'import torch'` works"):
            server.wait_ready()
        assert 2.5 <= time.monotonic() - started < 30 and process.poll() is not None  # stopped, not left importing
        assert 3 <= len(said) <= 5 and said == sorted(said) and said[0] >= 0.5, said
    finally:
        server.close()
    # A search's server may take 600 s to start, whatever its trial timeout (a start is no trial), and a Tuner says
    # the wait as a stage of the search.
    from autotune.tuner import Tuner

    tuner = Tuner("chmm", "cpu", "tiny", studies=tmp_path / "studies", trial_timeout=2.5, on_stage=said.append)
    assert tuner.runner.server.start_timeout == 600
    tuner.runner.server.on_start_wait(12.0)
    assert said[-1] == ("the fork server, which every trial forks from, is still importing torch after 12 s (a first "
                        "import from a cold disk or a network file system can take a minute)")
    tuner.close()


def test_a_removed_working_directory_is_said_not_taken_for_a_broken_torch(tmp_path):
    # A shell left in a folder another command removed: `autotune search` said "studies: No such file or
    # directory", and with --studies elsewhere torch's "oneMKL FATAL ERROR: Cannot load libtorch_cpu.so" ended in
    # "check that `python -c 'import torch'` works" (this machine). The CLI says it before anything runs; a fork
    # server that fails to start there says it in place of torch.
    gone = tmp_path / "gone"
    script = (
        "import json, os, sys, subprocess\n"
        f"os.makedirs({str(gone)!r}); os.chdir({str(gone)!r}); os.rmdir({str(gone)!r})\n"
        "from autotune._forkserver import ForkServer, ServerFailed\n"
        "server = ForkServer(['no_such_preload_module'])\n"
        "try:\n"
        "    server.start(); server.wait_ready(); said = None\n"
        "except ServerFailed as exc:\n"
        "    said = str(exc)\n"
        "server.close()\n"
        "cli = subprocess.run([sys.executable, '-m', 'autotune', 'search', '-w', 'chmm', '-s', 'tiny', '-n', '1',\n"
        f"                     '--studies', {str(tmp_path / 'studies')!r}],\n"
        "                    capture_output=True, text=True, timeout=120)\n"
        "print(json.dumps([said, cli.returncode, cli.stderr]))\n")
    said, code, stderr = fresh_process_json(script, cwd=tmp_path)
    assert said.endswith("; the working directory no longer exists: cd into a folder that exists"), said
    assert code == 2 and stderr.strip() == (
        "autotune: error: the working directory no longer exists (removed while this shell stayed in it): cd into a "
        "folder that exists and run the command again"), stderr
    assert not (tmp_path / "studies").exists()


def test_a_fork_server_killed_mid_trial_is_that_trial_s_crash_and_the_next_trial_runs(tmp_path):
    # SIGKILL to the fork server during a chmm search's second trial (this machine) ended the search "aborted",
    # exit 130, with the trial left RUNNING in the study: an EOFError from the server's pipe became click's Abort.
    workload = _steady_variant(tmp_path, "        seconds = config[\"work\"] / 50_000\n",
                               "        seconds = config[\"work\"] / 50_000\n        import os, signal\n"
                               "        if config['work'] == 2:\n            os.kill(os.getppid(), signal.SIGKILL)\n"
                               "            time.sleep(30)\n")
    runner = Runner("subprocess", timeout=60)
    try:
        runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 1}, str(tmp_path), FAST_MEASURER,
                                purpose="reference"))
        started = time.perf_counter()
        with pytest.warns(UserWarning, match="the trial runs again"):  # once: it kills the next server too
            killed = runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 2}, str(tmp_path),
                                             FAST_MEASURER))
        assert killed.status == "crash" and killed.error == (
            "process died: its fork server died from SIGKILL while it ran; a new one runs the next"), killed.error
        assert time.perf_counter() - started < 20  # its trial went with it, not waited for
        after = runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 3}, str(tmp_path), FAST_MEASURER))
        assert after.status == "ok", after.error
    finally:
        runner.close()


def test_a_fork_server_killed_from_outside_mid_trial_runs_that_trial_again(tmp_path):
    # pkill of the fork server while a search re-measured its baseline: "baseline #0 - (crash when re-measured)",
    # and the export had no speedup. The kernel's OOM killer did not kill it: no config's doing.
    import signal
    import threading

    workload = _steady_variant(tmp_path, "            time.sleep(seconds)\n",
                               "            time.sleep(seconds)\n            time.sleep(0.2)\n")
    runner = Runner("subprocess", timeout=60)
    try:
        runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 1}, str(tmp_path), FAST_MEASURER,
                                purpose="reference"))
        server = runner.server._process.pid
        threading.Timer(1.0, os.kill, (server, signal.SIGTERM)).start()
        with pytest.warns(UserWarning, match=r"the fork server died from SIGTERM while a trial ran, not by the "
                                             r"kernel's OOM killer \(pkill, a supervisor\?\): the trial runs again"):
            result = runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 2}, str(tmp_path),
                                             {**FAST_MEASURER, "min_time": 2.0}))
        assert result.status == "ok", result.error
        assert runner.server._process.pid != server
    finally:
        runner.close()


def test_a_refused_search_leaves_no_fork_server_behind(tmp_path):
    from autotune.exceptions import AutotuneError
    from autotune.settings import SearchSettings

    before = _servers_of_this_process()
    with pytest.raises(AutotuneError):
        SearchSettings("chmm", "cpu", "huge", studies=str(tmp_path)).tuner()
    assert _servers_of_this_process() == before


def test_the_busy_core_check_waits_for_the_fork_server_it_started(tmp_path, monkeypatch):
    # Started early, the server was still importing torch when `run` and `explain` (which call no warm-up)
    # looked for other work on the machine: its import read as a core kept busy by another process.
    import autotune.tuner as tuner_module
    from autotune.settings import SearchSettings

    tuner = SearchSettings("chmm", "cpu", "tiny", studies=str(tmp_path)).tuner()
    ready_when_looked: list[bool] = []
    monkeypatch.setattr(tuner_module, "busy_cores", lambda: ready_when_looked.append(tuner.runner.server._ready) or 0.0)
    try:
        tuner.ensure_reference()
    finally:
        tuner.close()
    assert ready_when_looked == [True]


@pytest.mark.parametrize("kills, status, error", [
    ((3, 4), "oom", "process killed by the kernel's OOM killer (out of memory: the machine's, or its cgroup's limit)"),
    ((3, 3), "crash", "process died from SIGKILL"),
    ((None, None), "crash", "process died from SIGKILL"),  # no /proc/vmstat: not known
])
def test_a_trial_the_kernel_s_oom_killer_took_is_oom_not_a_crash(tmp_path, monkeypatch, kills, status, error):
    # Over a container's memory limit (a 1,200 MiB cgroup, this machine) the kernel SIGKILLed a trial that
    # filled it: "crash: process died from SIGKILL", where --memory-limit's own refusal is "oom", a constraint
    # the sampler learns from. /proc/vmstat's oom_kill rose by one with it.
    import autotune.runner as runner_module

    workload = _steady_variant(tmp_path, "        seconds = config[\"work\"] / 50_000\n",
                               "        seconds = config[\"work\"] / 50_000\n        import os, signal\n"
                               "        if config['work'] == 2:\n            os.kill(os.getpid(), signal.SIGKILL)\n")
    read = iter(kills)
    runner = Runner("subprocess", timeout=60)
    try:
        runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 1}, str(tmp_path), FAST_MEASURER,
                                purpose="reference"))
        monkeypatch.setattr(runner_module, "oom_kills", lambda: next(read))
        killed = runner.run(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 2}, str(tmp_path), FAST_MEASURER))
    finally:
        runner.close()
    assert (killed.status, killed.error) == (status, error)


def test_torchs_thread_count_is_set_only_where_it_differs(in_trial_process, cache, monkeypatch):
    # torch.set_num_threads(2) on 2 cores, called again where torch already ran 2, made numba's 0.12 ms runs (chmm at
    # tiny) stall 4 ms every 30 runs or so once a check had run: their mean twice their median. The count is still
    # the one asked for, and recorded.
    import torch

    from autotune.devices import cpu_threads
    from autotune.runner import execute

    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(torch, "get_num_threads", lambda: cpu_threads())
    assert execute(_request(cache, "ok"))["status"] == "ok" and calls == []
    assert execute(dataclasses.replace(_request(cache, "ok"), threads=1))["status"] == "ok" and calls == [1]


def test_a_trial_keeps_the_thread_count_it_was_given_and_the_one_its_workload_ran_with(in_trial_process, cache, monkeypatch):
    # A workload of mine offered torch.set_num_threads as a knob (1, 2, 4, set in build): `run` said "2 threads",
    # the count autotune gave, whatever the knob's value (this 2-core CPU). Both are kept: the count given (a
    # budget: what it ran beyond it is said), and the count it ran with, in its environment, which `run` shows.
    import torch

    from autotune.registry import get_workload_class
    from autotune.runner import execute

    workload = get_workload_class(BROKEN)
    build = workload.build

    def own_count(self, config):
        torch.set_num_threads(1)
        return build(self, config)

    monkeypatch.setattr(workload, "build", own_count)
    before = torch.get_num_threads()
    try:
        result = execute(dataclasses.replace(_request(cache, "ok"), threads=2))
        assert (result["threads"], result["environment"]["cpu_threads"]) == (2, 1)
    finally:
        torch.set_num_threads(before)


def test_a_trial_caches_numba_s_kernels_beside_the_workloads_caches_unless_told_where(in_trial_process, cache,
                                                                                      monkeypatch, tmp_path):
    # In the one folder the search checked it can write (Tuner.ensure_reference), shared by every trial; unset,
    # numba caches beside the workload's own file.
    from autotune.registry import numba_folder
    from autotune.runner import execute

    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert execute(_request(cache, "ok"))["status"] == "ok"
    assert os.environ["NUMBA_CACHE_DIR"] == str(numba_folder(cache)) == str(cache.parent.parent / "numba")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert execute(_request(cache, "ok"))["status"] == "ok"
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "elsewhere")


# -- how a trial's end is classified, without a process (each answer as the fork server gives it) --------------

class _AnsweringServer:
    """A fork server that answers each call in turn: ``(result, exit code, timed out)``, or raises a ServerDied."""

    def __init__(self, *answers):
        self.answers, self.timeouts = list(answers), []

    def call(self, function, args, timeout, on_wait=None):
        self.timeouts.append(timeout)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self):
        pass


def _answered(monkeypatch, *answers, kills=None):
    """A runner whose trials end as ``answers`` say, the kernel's OOM kills read as ``kills`` (in turn)."""
    import autotune.runner as runner_module

    read = iter(kills or [None] * 4)
    monkeypatch.setattr(runner_module, "oom_kills", lambda: next(read))
    runner = Runner(timeout=5)
    runner._server = _AnsweringServer(*answers)
    return runner, TrialRequest(BROKEN, "tiny", "cpu", "cpu", {"behaviour": "ok"}, "/nonexistent", FAST_MEASURER)


@pytest.mark.parametrize("answer, kills, status, error", [
    ((None, None, True), None, "timeout", "ran past the 5 s trial timeout; killed"),
    ((None, -11, False), None, "crash", "process died from SIGSEGV"),
    ((None, -9, False), [3, 4], "oom", "process killed by the kernel's OOM killer (out of memory: the machine's, or "
                                       "its cgroup's limit)"),
    ((None, -9, False), [3, 3], "crash", "process died from SIGKILL"),
    ((None, -6, False), [3, 4], "crash", "process died from SIGABRT"),  # only SIGKILL is the OOM killer's
    ((None, 3, False), None, "crash", "process exited with status 3 without a result"),
    ((None, 0, False), None, "crash", "process exited with status 0 without a result"),
])
def test_how_a_trial_s_process_ended_is_its_status(monkeypatch, answer, kills, status, error):
    runner, request = _answered(monkeypatch, answer, kills=kills)
    result = runner.run(request)
    assert (result.status, result.error, result.config) == (status, error, request.config)
    assert 0 <= result.wall_seconds < 1


def test_a_trial_s_result_is_kept_with_its_wall_time_from_here_and_the_timeout_it_was_given(monkeypatch):
    outcome = TrialResult("ok", {"behaviour": "ok"}, throughput=5.0, wall_seconds=99.0).to_dict()
    runner, request = _answered(monkeypatch, (outcome, 0, False), (None, None, True))
    result = runner.run(request)
    assert (result.status, result.throughput) == ("ok", 5.0) and result.wall_seconds < 1  # not the child's 99 s
    assert runner.run(request, timeout=2.5).error == "ran past the 2.5 s trial timeout; killed"
    assert runner.server.timeouts == [5, 2.5]


def test_a_fork_server_that_dies_mid_trial_runs_it_again_once_unless_the_oom_killer_took_it(monkeypatch):
    from autotune._forkserver import ServerDied

    outcome = TrialResult("ok", {"behaviour": "ok"}, throughput=5.0).to_dict()
    runner, request = _answered(monkeypatch, ServerDied("killed", 15), (outcome, 0, False), kills=[3, 3, 3])
    with pytest.warns(UserWarning, match="the fork server died from SIGTERM while a trial ran, not by the kernel's "
                                         "OOM killer .* the trial runs again") as said:
        assert runner.run(request).status == "ok"
    assert said[0].filename == __file__  # the line that ran the trial (a search's), not the runner's own
    runner, request = _answered(monkeypatch, ServerDied("killed", 15), ServerDied("killed again", 9), kills=[3] * 4)
    with pytest.warns(UserWarning):
        result = runner.run(request)
    assert (result.status, result.error) == ("crash", "process died: killed again")  # not a third time
    runner, request = _answered(monkeypatch, ServerDied("killed", 9), kills=[3, 4, 4])
    assert runner.run(request).status == "oom"  # the kernel's pick: not run again
    runner, request = _answered(monkeypatch, ServerDied("killed", 9), (outcome, 0, False), kills=[None] * 3)
    with pytest.warns(UserWarning):  # no /proc/vmstat: not known to be the OOM killer's, so run again
        assert runner.run(request).status == "ok"


def test_a_runner_s_isolation_and_timeout(runner):
    from autotune.runner import TRIAL_TIMEOUT

    with pytest.raises(ValueError, match="isolation must be 'subprocess' or 'inprocess', got 'thread'"):
        Runner("thread")
    assert Runner().timeout == TRIAL_TIMEOUT and Runner(timeout=0.5).timeout == 0.5
    here = Runner("inprocess")
    here.start()
    here.wait_ready()  # nothing started, nothing to wait for
    assert here.warm_up() == 0.0 and here._server is None  # trials run in this process: no fork server
    Runner().wait_ready()  # none started yet: returns
    assert 0 <= runner.warm_up() < 60  # the seconds waited for the server (started by now)
    fresh = Runner()
    try:  # none started: started, and waited for until it has imported torch, before the first trial's clock
        assert fresh.warm_up() > 0 and fresh._server is not None and fresh._server._ready
    finally:
        fresh.close()
    with pytest.raises(dataclasses.FrozenInstanceError):  # a request is what a trial ran: never changed after
        TrialRequest(BROKEN, "tiny", "cpu", "cpu", {}, "/c").size = "full"


def test_an_error_is_out_of_memory_only_by_its_type_or_its_allocator_s_words(monkeypatch):
    import sys

    pytest.importorskip("torch")  # loaded, as in a trial's process

    from autotune.runner import _is_out_of_memory

    assert _is_out_of_memory(RuntimeError("DefaultCPUAllocator: not enough memory"), "cpu")
    assert not _is_out_of_memory(RuntimeError("CUDA error: out of memory"), "cpu")  # a CUDA sign, not on a CPU
    assert not _is_out_of_memory(ValueError("DefaultCPUAllocator"), "cpu")
    monkeypatch.delitem(sys.modules, "torch")  # an error before torch was imported: only Python's own type says so
    assert not _is_out_of_memory(RuntimeError("DefaultCPUAllocator: not enough memory"), "cpu")
    assert _is_out_of_memory(MemoryError(), "cpu")


@pytest.mark.parametrize("count, kept", [("0", "0"), ("-1", "-1"), ("float('inf')", "inf"), ("float('nan')", "nan"),
                                          ("True", "True"), ("'8'", "'8'"), ("0.5", 0.5), ("3", 3)])
def test_a_count_of_items_is_a_positive_finite_number(in_trial_process, tmp_path, count, kept):
    """``kept``: the count a trial keeps, or (text) how its error names the one refused."""
    from autotune.runner import execute

    workload = _steady_variant(tmp_path, "        return 100", f"        return {count}")
    cache = tmp_path / "studies" / "cache" / "steady"  # made, with its parents, by the first trial
    made = TrialResult.from_dict(execute(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 5}, str(cache),
                                                      FAST_MEASURER, purpose="reference")))
    assert made.status == "ok" and 0 < made.times[0] < 60 and len(made.times) == 1  # one run, its count unread
    result = TrialResult.from_dict(execute(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 5}, str(cache),
                                                        FAST_MEASURER)))
    if isinstance(kept, str):
        assert result.status == "error" and f"items_per_run returned {kept}; it must be a positive" in result.error
    else:
        assert (result.status, result.items_per_run) == ("ok", kept), result.error


def test_an_error_is_kept_in_one_line_of_500_characters_and_its_traceback_s_last_4000(in_trial_process, tmp_path):
    from autotune.runner import execute

    workload = _steady_variant(tmp_path, "        return 100", "        raise ValueError('long ' * 1000 + 'end')")
    result = TrialResult.from_dict(execute(TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 5}, str(tmp_path),
                                                        FAST_MEASURER)))
    assert result.status == "error" and result.error.startswith("ValueError: long long") and len(result.error) == 500
    assert len(result.traceback) == 4000 and result.traceback.endswith("long end\n")  # its end: the error itself


def test_a_process_s_mapped_bytes_are_its_address_space():
    from autotune.runner import _mapped_bytes

    if not Path("/proc/self/statm").exists():
        pytest.skip("no /proc")
    assert 0.9 < _mapped_bytes() / psutil.Process().memory_info().vms < 1.1


def test_without_proc_a_process_s_mapped_bytes_are_0_not_an_error(monkeypatch):
    # Without /proc (macOS), the check of what a trial maps before a memory limit is taken is skipped: 0 mapped.
    import autotune.runner as runner

    class Unreadable:
        def __init__(self, path):
            pass

        def read_text(self):
            raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(runner, "Path", Unreadable)
    assert runner._mapped_bytes() == 0


def test_the_reference_config_failing_against_what_to_reference_stored_blames_to_reference(in_trial_process, tmp_path):
    # The first output is held to the check's control: there, the reference config's own output failing against
    # its stored form says that to_reference loses what the check compares, not that the config is wrong.
    from autotune.runner import execute

    workload = _steady_variant(tmp_path, "    def items_per_run(self, config):\n",
                               "    def to_reference(self, output):\n        return output + 1\n\n"
                               "    def items_per_run(self, config):\n")
    request = TrialRequest(workload, "tiny", "cpu", "cpu", {"work": 5}, str(tmp_path), FAST_MEASURER,
                           reference={"work": 5})
    assert execute(dataclasses.replace(request, purpose="reference"))["status"] == "ok"
    result = TrialResult.from_dict(execute(request))
    assert result.status == "error" and "to_reference changes the output it stores" in result.error, result.error
    other = TrialResult.from_dict(execute(dataclasses.replace(request, config={"work": 6})))
    assert other.status == "incorrect"  # another config's failure is its own


def test_a_result_s_repr_leaves_out_its_runs_traceback_and_environment():
    # In the study, not a repr: 60,000 characters for 3 trials.
    result = TrialResult("error", {"x": 1}, times=[0.123456] * 500, warmup_times=[0.2] * 50, traceback="T" * 4000,
                         environment={"packages": "P" * 4000})
    said = repr(result)
    assert "0.123456" not in said and "0.2," not in said and "TTT" not in said and "PPP" not in said
    assert "status='error'" in said and len(said) < 1000


def test_a_cached_reference_is_read_as_tensor_data_where_torch_is(cache, monkeypatch):
    from autotune.runner import execute

    request = dataclasses.replace(_request(cache, "ok"), purpose="cached reference")
    assert execute(request)["status"] == "ok"
    planted = cache / "planted"
    planted.mkdir()
    (planted / "reference-cpu.pt").write_bytes(b"not a tensor file")
    refused = TrialResult.from_dict(execute(dataclasses.replace(request, cache_dir=str(planted))))
    assert refused.status == "error" and refused.error


def test_a_full_disk_is_found_among_an_error_s_causes_and_fails_the_machine_not_the_config():
    import errno

    from autotune.exceptions import DiskFullError
    from autotune.runner import _is_disk_full, unless_lost

    def raised_from(cause):
        try:
            raise RuntimeError("numba could not cache its kernel") from cause
        except RuntimeError as exc:
            return exc

    assert _is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert _is_disk_full(raised_from(OSError(errno.EDQUOT, "Disk quota exceeded")))
    assert not _is_disk_full(raised_from(OSError(errno.EACCES, "Permission denied"))) and not _is_disk_full(None)
    looped = RuntimeError("a")
    looped.__context__ = RuntimeError("b")
    looped.__context__.__context__ = looped
    assert not _is_disk_full(looped)  # a cycle of causes ends
    kept = TrialResult("error", {}, error="OSError: full")
    assert unless_lost(kept) is kept
    with pytest.raises(DiskFullError, match="OSError: full: no config is judged from it; free space"):
        unless_lost(TrialResult("error", {}, error="OSError: full", lost=True))


def test_a_trial_result_round_trips_through_json_without_infinities():
    result = TrialResult("ok", {"x": 1}, throughput=float("inf"), times=[0.1, 0.2], items_per_run=4)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["throughput"] is None and data["times"] == [0.1, 0.2]
    assert TrialResult.from_dict({**data, "from_a_later_version": 1}) == dataclasses.replace(result, throughput=None)
    assert result.measurement().times == [0.1, 0.2] and result.measurement().first_run_seconds == 0.0  # unrecorded
    assert dataclasses.replace(result, warmup_seconds=2.5).measurement().first_run_seconds == 2.5
    assert TrialResult("ok", {}, times=[0.1]).measurement() is None  # no count of items
    assert TrialResult("ok", {}, items_per_run=4).measurement() is None  # no times
    assert TrialResult("ok", {}, busy_elsewhere=1.5).beside_other_work
    assert not TrialResult("ok", {}, busy_elsewhere=0.1).beside_other_work and not result.beside_other_work


def test_the_reference_file_names_its_config_and_device():
    request = TrialRequest(BROKEN, "tiny", "cpu", "cpu", {}, "/c")
    named = dataclasses.replace(request, reference={"behaviour": "ok"})
    assert request.reference_path == Path("/c/reference-cpu.pt")
    assert re.fullmatch(r"/c/reference-cpu-[0-9a-f]{12}\.pt", str(named.reference_path))
    assert named.reference_path != dataclasses.replace(request, reference={"behaviour": "fast"}).reference_path
    assert dataclasses.replace(named, device="h100").reference_path.name.startswith("reference-h100-")
    in_order = dataclasses.replace(request, reference={"a": 1, "b": 2}).reference_path
    assert in_order == dataclasses.replace(request, reference={"b": 2, "a": 1}).reference_path  # one config, one file
