import sys

import pytest

from autotune.devices import CAPABILITIES, PROFILES, detect, get_profile, resolve_device
from autotune.exceptions import DeviceUnavailableError, InvalidConfigError, UnknownNameError
from tests.conftest import fresh_process_json


def test_profiles_cover_the_issue_and_use_known_capabilities():
    assert set(PROFILES) == {"cpu", "v100", "a100", "h100", "h200", "rtx3090", "rtx5000-ada", "mps"}
    for profile in PROFILES.values():
        assert profile.capabilities <= CAPABILITIES, profile.name


def test_capabilities_follow_the_hardware():
    assert not PROFILES["v100"].has("bf16") and PROFILES["v100"].has("fp16_tensor_cores")
    assert not PROFILES["v100"].has("flash_attention") and PROFILES["a100"].has("flash_attention")
    assert PROFILES["h100"].has("tf32") and PROFILES["h100"].has("fast_fp64")
    assert not PROFILES["rtx3090"].has("fast_fp64")
    assert not PROFILES["mps"].has("fp64") and not PROFILES["cpu"].has("cuda")
    assert PROFILES["v100"].has("efficient_attention") and not PROFILES["v100"].has("cudnn_attention")
    assert PROFILES["h100"].has("cudnn_attention")


def test_the_cpu_can_compile_only_where_it_has_the_compiler_torch_compile_runs(monkeypatch, tmp_path):
    # Inductor's CPU backend runs $CXX, else g++: an image without one failed every compiled trial (InvalidCxxCompiler,
    # 8 s into each for ten at tiny), and the search kept asking for them.
    from autotune.space import SearchSpace, load_space

    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    cpu = resolve_device("cpu", use_torch=False).profile
    assert not cpu.has("compile") and PROFILES["cpu"].has("compile")  # the profile's: a machine's exports load
    space = load_space("ten").for_device(cpu)
    assert space.parameters["compile"].choices == ("none",)
    assert space.left_out() == ["compile=default, max-autotune-no-cudagraphs left out of this search: torch.compile "
                                "needs a C++ compiler (g++, or the one $CXX names), and none is found"]
    with pytest.raises(InvalidConfigError, match=r"compile='default' needs compile, which this device lacks "
                       r"\(torch.compile needs a C\+\+ compiler \(g\+\+, or the one \$CXX names\), and none is "
                       r"found\); choose one of: none$"):
        space.parse_assignments(["compile=default"], space.defaults)
    with pytest.raises(InvalidConfigError, match=r"^--config x.json: compile=default is not allowed on device 'cpu' "
                       r"\(torch.compile needs a C\+\+ compiler"):
        space.allowed({"compile": "default"}, "--config x.json")
    # A knob that needs the compiler as a whole is held at its default, and said so.
    (tmp_path / "s.yaml").write_text("schema_version: 1\nparameters:\n  fused:\n    choices: [false, true]\n"
                                     "    requires: [compile]\n  work:\n    choices: [1, 2]\n"
                                     "defaults: {fused: false, work: 1}\nbaseline: {fused: false, work: 2}\n")
    assert SearchSpace.from_file(tmp_path / "s.yaml").for_device(cpu).left_out() == [
        "fused (held at false) left out of this search: torch.compile needs a C++ compiler (g++, or the one $CXX "
        "names), and none is found"]
    compiler = tmp_path / "c++"
    compiler.write_text("#!/bin/sh\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    cpu = resolve_device("cpu", use_torch=False).profile
    assert cpu.has("compile") and load_space("ten").for_device(cpu).left_out() == []
    assert load_space("ten").for_device(PROFILES["h100"]).left_out() == []  # a profile promises its capabilities
    # On the CPU, a choice that needs the hardware too is not said (reduce-overhead needs CUDA graphs).
    assert "reduce-overhead" not in " ".join(load_space("ten").for_device(
        resolve_device("cpu", use_torch=False).profile).left_out())


def test_a_gpu_compiles_only_where_triton_finds_its_c_compiler(monkeypatch, tmp_path):
    # Triton builds a C launcher for every kernel with $CC, else gcc, else clang: a GPU image without one failed
    # each compiled trial. Its GPUs lose `compile` and say why; the CPU's own compiler is another matter.
    import autotune.devices as devices

    monkeypatch.setattr(devices, "_torch_sees_only_the_cpu", lambda: False)
    monkeypatch.setattr(devices, "_cuda_devices_from_torch",
                        lambda: [devices.DetectedDevice(PROFILES["h100"], "NVIDIA H100 80GB HBM3", 80 << 30, 0)])
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    gpu = devices.detect()[0].profile
    assert gpu.name == "h100" and not gpu.has("compile") and gpu.has("cuda_graphs")
    space = __import__("autotune.space", fromlist=["load_space"]).load_space("ten").for_device(gpu)
    assert space.left_out() == [
        "compile=default, max-autotune-no-cudagraphs, reduce-overhead left out of this search: torch.compile's "
        "Triton kernels need a C compiler (gcc or clang, or the one $CC names), and none is found"]
    clang = tmp_path / "clang"
    clang.write_text("#!/bin/sh\n")
    clang.chmod(0o755)
    assert devices.detect()[0].profile.has("compile")  # no $CC: gcc, else clang
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert not devices.detect()[0].profile.has("compile")  # $CC names the one Triton runs
    monkeypatch.setenv("CC", str(clang))
    assert devices.detect()[0].profile == PROFILES["h100"]


def test_cpu_attention_capabilities_are_the_sdpa_backends_torch_runs_here():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 8, 4)
    backends = {"flash_attention": SDPBackend.FLASH_ATTENTION, "efficient_attention": SDPBackend.EFFICIENT_ATTENTION,
                "cudnn_attention": SDPBackend.CUDNN_ATTENTION}
    for capability, backend in backends.items():
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, q, q)
            runs = True
        except RuntimeError:
            runs = False
        assert runs == PROFILES["cpu"].has(capability), capability


def test_cpu_is_always_detected_last():
    found = detect()
    assert found[-1].profile.name == "cpu" and found[-1].details["threads"] >= 1
    assert detect(use_torch=False)[-1].profile.name == "cpu"


def test_unknown_profile_lists_the_valid_ones():
    with pytest.raises(UnknownNameError, match="valid: a100, auto, cpu, cuda, h100"):
        get_profile("tpu")


def test_one_gpu_named_as_torch_names_it_says_how_to_pick_it():
    # `--device cuda:1`, torch's spelling, was "unknown device" and a hint of derived names (cuda-nvidia-l4).
    from autotune.devices import filed_under

    for name in ("cuda:1", "CUDA:1"):
        with pytest.raises(UnknownNameError, match=r"give cuda \(or the GPU's profile\) and pick GPU 1 with "
                                                   "CUDA_VISIBLE_DEVICES=1$"):
            filed_under(name)


def test_a_device_is_named_in_any_case(tmp_path):
    # `--device H100`, as the card is called, was "unknown device 'H100'".
    import autotune
    from autotune.config import config_path, write_tuned_config
    from autotune.devices import filed_under

    assert filed_under("H100") == "h100" and filed_under("CPU") == "cpu" and filed_under("Cuda-NVIDIA-L4") == \
        "cuda-nvidia-l4"
    assert resolve_device("CPU", use_torch=False).profile.name == "cpu"
    write_tuned_config({"schema_version": 1, "config": {"dtype": "float64"}, "speedup": 2.0},
                       config_path("chmm", "h100", "small", tmp_path))
    assert autotune.load_config("chmm", device="H100", studies=tmp_path).speedup == 2.0
    with pytest.raises(UnknownNameError, match="unknown device 'h10'"):
        filed_under("H10")


def test_missing_device_is_one_line_naming_what_was_found():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU; the message is tested where there is none")
    with pytest.raises(DeviceUnavailableError) as info:
        resolve_device("v100")
    message = str(info.value)
    assert "\n" not in message and "found: cpu" in message and "--device auto" in message


def test_cuda_names_the_first_cuda_gpu_here_and_is_filed_under_its_profile(tmp_path, monkeypatch):
    # `--device cuda`, as torch users write it: the first CUDA GPU found, filed under its profile's name.
    from autotune import devices
    from autotune.devices import DetectedDevice, _profile_for_cuda_name
    from autotune.config import SCHEMA_VERSION, config_path, write_tuned_config
    from autotune.tuned import load_config

    cpu = detect()[-1]
    gpus = [DetectedDevice(_profile_for_cuda_name("NVIDIA L4", None), "NVIDIA L4", index=0),
            DetectedDevice(PROFILES["h100"], "NVIDIA H100 80GB HBM3", index=1)]
    monkeypatch.setattr(devices, "detect", lambda use_torch=True: [*gpus, cpu])
    assert resolve_device("cuda").name == "NVIDIA L4" and resolve_device("cuda").profile.name == "cuda-nvidia-l4"
    export = config_path("chmm", "cuda-nvidia-l4", "tiny", tmp_path)
    write_tuned_config({"schema_version": SCHEMA_VERSION, "workload": "chmm", "device": "cuda-nvidia-l4",
                        "size": "tiny", "config": {"dtype": "float64"}}, export)
    assert load_config("chmm", device="cuda", studies=tmp_path).source == str(export)

    monkeypatch.setattr(devices, "detect", lambda use_torch=True: [cpu])
    assert resolve_device("auto").profile.name == "cpu"
    with pytest.raises(DeviceUnavailableError) as info:
        resolve_device("cuda")
    message = str(info.value)
    assert "\n" not in message and "has none" in message and "found: cpu" in message and "--device auto" in message


def test_h200_does_not_match_a_gh200_and_unnamed_gpus_get_one_name_on_both_paths():
    from autotune.devices import _profile_for_cuda_name

    assert _profile_for_cuda_name("NVIDIA H200", (9, 0)).name == "h200"
    assert _profile_for_cuda_name("NVIDIA GH200 480GB", (9, 0)).name == "cuda-nvidia-gh200-480gb"
    assert _profile_for_cuda_name("Tesla V100-SXM2-32GB", (7, 0)).name == "v100"
    # torch knows the capability, the driver's files do not: the name is the same either way.
    with_torch, from_driver = _profile_for_cuda_name("NVIDIA L4", (8, 9)), _profile_for_cuda_name("NVIDIA L4", None)
    assert with_torch.name == from_driver.name == "cuda-nvidia-l4"
    assert with_torch.has("bf16") and with_torch.has("compile")
    assert not from_driver.has("compile") and not from_driver.has("bf16")  # unknown: nothing assumed
    assert not _profile_for_cuda_name("Tesla P100", (6, 0)).has("compile")  # Triton needs sm70+


def test_the_driver_path_honours_cuda_visible_devices(tmp_path, monkeypatch):
    from autotune.devices import _cuda_devices_from_driver

    for i, (model, uuid) in enumerate([("NVIDIA H100 80GB HBM3", "GPU-aaaa"), ("NVIDIA A100-SXM4-80GB", "GPU-bbbb"),
                                       ("NVIDIA L4", "GPU-cccc")]):
        folder = tmp_path / f"0000:0{i}:00.0"
        folder.mkdir()
        (folder / "information").write_text(f"Model: \t\t {model}\nGPU UUID: \t {uuid}\n")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [d.profile.name for d in _cuda_devices_from_driver(tmp_path)] == ["h100", "a100", "cuda-nvidia-l4"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    found = _cuda_devices_from_driver(tmp_path)
    assert [(d.profile.name, d.index) for d in found] == [("cuda-nvidia-l4", 0), ("h100", 1)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")
    assert [d.profile.name for d in _cuda_devices_from_driver(tmp_path)] == ["a100"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _cuda_devices_from_driver(tmp_path) == []


def test_a_cpu_has_bf16_only_when_the_processor_says_so():
    from autotune.devices import _cpu_hardware_capabilities

    assert _cpu_hardware_capabilities("flags\t\t: fpu sse avx2 fma\n") == frozenset()
    assert _cpu_hardware_capabilities("flags\t\t: fpu avx512f avx512_bf16 amx_bf16\n") == {"bf16"}
    assert _cpu_hardware_capabilities("Features\t: fp asimd bf16 i8mm\n") == {"bf16"}
    assert not PROFILES["cpu"].has("bf16")  # the class of device promises nothing


class _Unreadable:
    """A ``Path`` of a machine without ``/proc`` (macOS): nothing can be read from it."""

    def __init__(self, path):
        pass

    def read_text(self):
        raise OSError("no /proc here")


def test_a_cpu_without_proc_cpuinfo_has_bf16_only_as_an_apple_arm_chip(monkeypatch):
    # macOS has no /proc/cpuinfo: its Arm chips do bfloat16 arithmetic, and elsewhere nothing is known, so nothing
    # is claimed (a mutant claimed bf16 on every such machine but an Apple chip).
    import platform

    from autotune import devices

    monkeypatch.setattr(devices, "Path", _Unreadable)
    for system, machine, found in (("darwin", "arm64", {"bf16"}), ("darwin", "x86_64", set()),
                                   ("linux", "aarch64", set())):
        monkeypatch.setattr(sys, "platform", system)
        monkeypatch.setattr(platform, "machine", lambda: machine)
        assert devices._cpu_hardware_capabilities() == frozenset(found), (system, machine)


def test_what_the_machine_cannot_say_is_left_out_and_detection_goes_on(tmp_path, monkeypatch):
    # No /proc (macOS), no CPU affinity (macOS), no cgroup file, no page count, a GPU's unreadable entry: each is a
    # fact not found, never an error out of `autotune devices` or a search's detection.
    import platform

    from autotune import devices

    with monkeypatch.context() as patched:
        patched.setattr(devices, "Path", _Unreadable)
        patched.setattr(platform, "processor", lambda: "")
        patched.setattr(platform, "machine", lambda: "arm64")
        assert devices.cpu_name() == "arm64"
    monkeypatch.delattr(devices.os, "sched_getaffinity")
    monkeypatch.setattr(devices.os, "cpu_count", lambda: 6)
    assert devices.cpu_threads() == 6  # no cgroup quota is read either: macOS has none
    monkeypatch.setattr(devices, "PROC_CGROUP", tmp_path / "no-cgroup")
    assert devices.cgroup_cpu_quota() is None

    def no_pages(name):
        raise ValueError(f"unrecognized configuration name {name}")

    monkeypatch.setattr(devices.os, "sysconf", no_pages)
    assert devices._physical_memory() is None
    for name, model in (("0000:01:00.0", None), ("0000:02:00.0", "NVIDIA H100 80GB HBM3")):
        (tmp_path / name).mkdir()
        if model:
            (tmp_path / name / "information").write_text(f"Model: \t\t {model}\nGPU UUID: \t GPU-aaaa\n")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    found = devices._cuda_devices_from_driver(tmp_path)
    assert [(d.profile.name, d.index) for d in found] == [("h100", 1)]  # the index is the driver's order's


def test_the_compiler_looked_for_is_cxx_else_g_plus_plus_or_clang_plus_plus_on_macos(monkeypatch):
    import shutil

    from autotune.devices import _software

    looked = []
    monkeypatch.setattr(shutil, "which", looked.append)
    monkeypatch.delenv("CXX", raising=False)
    for system in ("linux", "darwin"):
        monkeypatch.setattr(sys, "platform", system)
        assert "compile" not in _software()[0]  # none found
    monkeypatch.setenv("CXX", "icpx")
    _software()
    assert looked == ["g++", "clang++", "icpx"]


def test_a_study_filed_under_a_derived_gpu_name_is_found_from_a_machine_without_that_gpu(tmp_path):
    # A search on an L4 files its study as chmm-cuda-nvidia-l4-tiny; `report` and `best` name it from any machine.
    import optuna

    from autotune.devices import filed_device_name
    from autotune.stored import open_stored_study

    assert filed_device_name("h100") == "h100" and filed_device_name("cuda-nvidia-l4") == "cuda-nvidia-l4"
    for bad in ("tpu", "cuda", "cuda-", "CUDA-L4", "cuda-l4/../x"):
        with pytest.raises(UnknownNameError, match="derived name"):
            filed_device_name(bad)
    storage = f"sqlite:///{tmp_path / 'autotune.db'}"
    optuna.create_study(study_name="chmm-cuda-nvidia-l4-tiny", storage=storage)
    stored = open_stored_study("chmm", "cuda-nvidia-l4", "tiny", storage=storage, studies=tmp_path)
    assert stored.device == "cuda-nvidia-l4" and stored.study.study_name == "chmm-cuda-nvidia-l4-tiny"


@pytest.mark.parametrize("text, cpu_only", [
    ("from typing import Optional\n__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n",
     True),  # a CPU wheel's, as torch 2.13 writes it
    ("cuda = None\nhip = None\nrocm = None\n", True),
    ("cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n", False),
    ("cuda = None\nhip = '6.4.43482'\n", False),  # ROCm: torch.cuda drives the AMD GPU
    ("cuda = None\n", False),  # no word on ROCm: torch is asked
    ("cuda = _build_config()\nhip = None\n", False),  # not a literal: unknown
    ("cuda = None\nhip = None\nif (\n", False),  # not Python
    (None, False),  # no file
])
def test_detection_skips_torch_only_where_its_build_has_no_gpu_backend(tmp_path, text, cpu_only):
    from autotune.devices import _torch_sees_only_the_cpu

    version_file = tmp_path / "version.py"
    if text is not None:
        version_file.write_text(text)
    assert _torch_sees_only_the_cpu(version_file) is cpu_only


def test_auto_finds_the_cpu_without_importing_a_cpu_only_torch():
    # In a fresh process: this one has imported torch, and then detection asks it (it is cheap there).
    script = ("import json, sys\n"
              "from autotune import devices\n"
              "found = devices.detect()\n"
              "print(json.dumps([devices._torch_sees_only_the_cpu(), 'torch' in sys.modules,\n"
              "                  [d.profile.name for d in found]]))\n")
    cpu_only, imported, names = fresh_process_json(script)
    assert imported is not cpu_only  # torch is imported exactly where its build could drive a GPU
    assert names[-1] == "cpu" and (names == ["cpu"] or not cpu_only)
    import torch

    # The file, read, says what torch, imported, says.
    assert cpu_only == (torch.version.cuda is None and torch.version.hip is None and sys.platform != "darwin")


def test_a_torch_that_cannot_be_imported_is_one_line_from_every_command_that_looks_for_gpus(monkeypatch, capsys):
    # A broken torch install (a shim raising ImportError on this machine): `autotune devices` and `search -d auto`
    # ended in the ImportError's traceback, exit 1.
    from autotune.cli import main

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(DeviceUnavailableError, match=r"torch cannot be imported \(ModuleNotFoundError: .*\), and GPUs "
                                                     r"are found through it; check that `.*-c 'import torch'` works"):
        detect()
    with pytest.raises(SystemExit) as exited:
        main(["devices"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and len(lines) == 1 and lines[0].startswith("autotune: error: torch cannot be "
                                                                            "imported"), lines


@pytest.mark.parametrize("layout, expected", [
    # cgroup v2, a container's own tree (cgroupns): its cpu.max at the root of the mount
    ({"proc": "0::/\n", "cpu.max": "150000 100000\n"}, 1.5),
    # v2 without a namespace: the job's folder, a tighter parent above it
    ({"proc": "0::/ci/job\n", "ci/job/cpu.max": "max 100000\n", "ci/cpu.max": "100000 100000\n"}, 1.0),
    # v1 (cpu and cpuacct mounted together), beside the v2 tree of a hybrid host
    ({"proc": "2:cpu,cpuacct:/docker/abc\n0::/\n", "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "200000\n",
      "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n"}, 2.0),
    ({"proc": "1:cpu:/\n0::/\n", "cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({"proc": "0::/\n"}, None),  # no file: the root has no quota
])
def test_a_cgroup_cpu_quota_caps_the_threads_a_trial_gets(tmp_path, monkeypatch, layout, expected):
    # A 1-CPU quota on 2 cores: 2 threads timed an 800x800 product at 121 a second (the median run, between
    # the periods the quota held them), where 1 thread sustains 63; torch was given every core.
    import autotune.devices as devices

    for name, text in layout.items():
        path = tmp_path / ("self-cgroup" if name == "proc" else name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setattr(devices, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(devices, "PROC_CGROUP", tmp_path / "self-cgroup")
    assert devices.cgroup_cpu_quota() == expected
    monkeypatch.setattr(devices.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert devices.cpu_threads() == (8 if expected is None else max(1, int(expected)))


def test_the_gpus_torch_sees_are_read_with_their_profile_memory_index_and_capability(monkeypatch):
    # The path every GPU run takes, on this CPU: torch's view of two GPUs, one with a profile and one without.
    from types import SimpleNamespace

    import torch

    import autotune.devices as devices

    gpus = [SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, total_memory=80 << 30),
            SimpleNamespace(name="NVIDIA L4", major=8, minor=9, total_memory=24 << 30)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(gpus))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: gpus[index])
    found = devices._cuda_devices_from_torch()
    assert [(d.profile.name, d.name, d.memory_bytes, d.index) for d in found] == [
        ("h100", "NVIDIA H100 80GB HBM3", 80 << 30, 0), ("cuda-nvidia-l4", "NVIDIA L4", 24 << 30, 1)]
    assert found[1].profile.has("bf16") and found[1].profile.has("tf32")  # sm89: derived from its capability
    assert [d.details["compute_capability"] for d in found] == ["9.0", "8.9"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices._cuda_devices_from_torch() == []


def test_an_unnamed_gpu_compiles_from_sm70_and_has_bf16_from_sm80():
    # Triton (torch.compile's GPU backend) wants sm70 or newer: a Volta or Turing card without a profile of its
    # own compiles, a Pascal one does not. The major version decides, not the minor (sm75 is a T4).
    from autotune.devices import _profile_for_cuda_name

    for name, capability, compiles, bf16 in [("Quadro GV100", (7, 0), True, False), ("Tesla T4", (7, 5), True, False),
                                             ("Tesla P40", (6, 1), False, False), ("NVIDIA L40S", (8, 9), True, True)]:
        profile = _profile_for_cuda_name(name, capability)
        assert (profile.has("compile"), profile.has("fp16_tensor_cores"), profile.has("bf16")) == (
            compiles, compiles, bf16), name


def test_cuda_stops_reading_its_visible_devices_at_the_first_entry_it_cannot_read(monkeypatch):
    from autotune.devices import _visible

    for visible, expected in [("1,garbage,0", [None, 0]), ("MIG-4f2a,0", [1, None]), ("GPU-ffff,1", [None, 1]),
                              (",0", [None, None]), ("0, 1", [0, 1])]:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert [_visible(index, "GPU-aaaa") for index in (0, 1)] == expected, visible


def test_a_gpu_named_by_its_derived_name_is_found_and_the_cpu_is_found_without_torch(monkeypatch):
    from autotune import devices
    from autotune.devices import DetectedDevice, _profile_for_cuda_name

    cpu = detect(False)[-1]
    asked = []
    l4 = DetectedDevice(_profile_for_cuda_name("NVIDIA L4", (8, 9)), "NVIDIA L4", index=0)
    monkeypatch.setattr(devices, "detect", lambda use_torch=True: asked.append(use_torch) or [l4, cpu])
    assert resolve_device("cuda-nvidia-l4") is l4 and resolve_device("cpu") is cpu
    assert asked == [True, False]  # torch imported (seconds) only where a GPU may be asked for
    with pytest.raises(DeviceUnavailableError, match="device 'h100' .* is not on this machine; found: cuda-nvidia-l4"):
        resolve_device("h100")
    with pytest.raises(UnknownNameError):  # another unnamed GPU's name: not the L4 that is here
        resolve_device("cuda-nvidia-a10")


def test_numba_is_a_capability_only_where_it_is_installed(monkeypatch):
    import importlib.util

    from autotune.devices import NO_NUMBA, _software

    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numba" else find(name, *a))
    capabilities, missing = _software()
    assert "numba" not in capabilities and ("numba", NO_NUMBA) in missing
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "numba" else find(name, *a))
    capabilities, missing = _software()
    assert "numba" in capabilities and "numba" not in dict(missing)


def test_the_cpu_s_memory_is_the_machine_s():
    import psutil

    assert detect(False)[-1].memory_bytes == psutil.virtual_memory().total


def test_an_unknown_device_name_is_refused_before_anything_is_detected(monkeypatch):
    # Detection imports torch (seconds) and may fail on its own (a broken driver): a typo is that typo's error.
    from autotune import devices

    def detect(use_torch=True):
        raise AssertionError("detected")

    monkeypatch.setattr(devices, "detect", detect)
    with pytest.raises(UnknownNameError, match="'h10'"):
        resolve_device("h10")


def test_an_apple_gpu_is_found_by_torch_and_without_it_from_apple_silicon(monkeypatch):
    import platform

    import torch

    from autotune import devices

    monkeypatch.setattr(devices, "_cuda_devices_from_torch", lambda: [])
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    found = detect()
    assert [(d.profile.name, d.name, d.memory_bytes) for d in found[:-1]] == [
        ("mps", "Apple GPU (MPS)", devices._physical_memory())]
    # load_config finds it without importing torch: from the platform, as torch is not in sys.modules.
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(devices, "_cuda_devices_from_driver", lambda: [])
    monkeypatch.setattr(sys, "platform", "darwin")
    for machine, gpus in (("arm64", ["mps"]), ("x86_64", [])):  # without torch, Apple silicon's alone is taken
        monkeypatch.setattr(platform, "machine", lambda: machine)
        assert [d.profile.name for d in detect(use_torch=False)[:-1]] == gpus, machine
    assert "torch" not in sys.modules
