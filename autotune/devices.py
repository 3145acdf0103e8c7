"""Device profiles: what a device can run, and which ones this machine has.

A profile names a class of device (``v100``, ``h100``, ``cpu``...) with the
capabilities that decide which knob values make sense on it: a V100 has fp16
tensor cores but no bf16, so a V100 study never samples bf16. Search-space
files name these capabilities in ``requires``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import platform
import re
import shutil
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autotune.exceptions import DeviceUnavailableError, UnknownNameError, said

__all__ = [
    "CAPABILITIES",
    "PROFILES",
    "DetectedDevice",
    "DeviceProfile",
    "LOCAL_NAMES",
    "detect",
    "filed_device_name",
    "filed_under",
    "get_profile",
    "resolve_device",
]

#: Every capability a search-space file may require.
CAPABILITIES = frozenset(
    {
        "cpu",  # runs on the host processor
        "cuda",  # an NVIDIA GPU through CUDA
        "mps",  # Apple GPU through Metal
        "fp16",  # float16 arithmetic is supported at all
        "fp16_tensor_cores",  # float16 matrix units (sm70+)
        "bf16",  # bfloat16 arithmetic in hardware
        "tf32",  # TF32 matrix units (sm80+)
        "fp64",  # float64 is supported at all (not on MPS)
        "fast_fp64",  # float64 at half the float32 rate or better
        "flash_attention",  # FlashAttention kernels in SDPA (sm80+ GPUs; the CPU has its own)
        "efficient_attention",  # the memory-efficient SDPA kernel (any CUDA GPU)
        "cudnn_attention",  # cuDNN's fused SDPA kernel (sm80+ with cuDNN 9)
        "cuda_graphs",  # CUDA graph capture
        "compile",  # torch.compile with a working backend
        "pinned_memory",  # page-locked host memory for async copies
        "numba",  # software: numba is installed (the `numba` extra); added at detection
    }
)
#: Why a capability is missing for want of software: said where a search leaves out what needs it.
NO_NUMBA = "numba is not installed (pip install numba)"
NO_CXX = "torch.compile needs a C++ compiler (g++, or the one $CXX names), and none is found"
NO_CC = "torch.compile's Triton kernels need a C compiler (gcc or clang, or the one $CC names), and none is found"

_GIB = 1 << 30
_CUDA_COMMON = frozenset({"cuda", "fp16", "fp64", "cuda_graphs", "compile", "pinned_memory", "efficient_attention"})
_AMPERE_UP = _CUDA_COMMON | {"fp16_tensor_cores", "bf16", "tf32", "flash_attention", "cudnn_attention"}


@dataclass(frozen=True)
class DeviceProfile:
    """A class of device and what it can run. ``memory_bytes`` is the typical memory of the class; the detected
    device's own figure (:class:`DetectedDevice`) wins where there is one."""

    name: str
    kind: str  # "cpu", "cuda" or "mps": the torch device type
    description: str
    capabilities: frozenset[str]
    memory_bytes: int | None = None
    compute_capability: tuple[int, int] | None = None
    # Substrings of the driver's device name that identify this profile.
    name_patterns: tuple[str, ...] = ()
    # Capabilities this device lacks for want of software, each with why (detection's: a profile promises them).
    lacks: tuple[tuple[str, str], ...] = ()

    def has(self, capability: str) -> bool:
        return capability in self.capabilities

    def missing(self, requirements: frozenset[str] | set[str] | tuple[str, ...]) -> set[str]:
        """The requirements this device does not meet."""
        return set(requirements) - self.capabilities

    def lacking(self, requirements: frozenset[str] | set[str] | tuple[str, ...]) -> dict[str, str]:
        """The requirements it lacks for want of software alone, each with why ({} where it lacks hardware too)."""
        missing, why = self.missing(requirements), dict(self.lacks)
        return {name: why[name] for name in sorted(missing)} if missing and missing <= why.keys() else {}

    @property
    def torch_device(self) -> str:
        return self.kind


PROFILES: dict[str, DeviceProfile] = {
    profile.name: profile
    for profile in [
        # SDPA's CPU backends are the math kernel and a flash-attention kernel of its own. bf16 in hardware only
        # where the processor says so (see _cpu_hardware_capabilities).
        DeviceProfile("cpu", "cpu", "the host CPU", frozenset({"cpu", "fp16", "fp64", "fast_fp64", "compile",
                                                               "flash_attention"})),
        DeviceProfile("v100", "cuda", "NVIDIA V100 (Volta, sm70)", _CUDA_COMMON | {"fp16_tensor_cores", "fast_fp64"},
                      32 * _GIB, (7, 0), ("V100",)),
        DeviceProfile("a100", "cuda", "NVIDIA A100 (Ampere, sm80)", _AMPERE_UP | {"fast_fp64"},
                      80 * _GIB, (8, 0), ("A100",)),
        DeviceProfile("h100", "cuda", "NVIDIA H100 (Hopper, sm90)", _AMPERE_UP | {"fast_fp64"},
                      80 * _GIB, (9, 0), ("H100",)),
        DeviceProfile("h200", "cuda", "NVIDIA H200 (Hopper, sm90)", _AMPERE_UP | {"fast_fp64"},
                      141 * _GIB, (9, 0), ("H200",)),
        DeviceProfile("rtx3090", "cuda", "NVIDIA GeForce RTX 3090 (Ampere, sm86; fp64 at 1/64 rate)", _AMPERE_UP,
                      24 * _GIB, (8, 6), ("3090",)),
        DeviceProfile("rtx5000-ada", "cuda", "NVIDIA RTX 5000 Ada (sm89; fp64 at 1/64 rate)", _AMPERE_UP,
                      32 * _GIB, (8, 9), ("RTX 5000 Ada",)),
        # MPS has no float64 at all, and torch.compile on MPS is not dependable yet.
        DeviceProfile("mps", "mps", "Apple GPU through Metal (MPS)", frozenset({"mps", "fp16", "bf16"})),
    ]
}


@dataclass(frozen=True)
class DetectedDevice:
    """A device found on this machine, matched to a profile."""

    profile: DeviceProfile
    name: str  # what the driver or the OS calls it
    memory_bytes: int | None = None
    index: int | None = None  # CUDA ordinal
    details: dict = field(default_factory=dict, compare=False, hash=False)


#: Names of a device of this machine rather than of a profile: ``auto`` (the first accelerator, else the CPU)
#: and ``cuda`` (the first CUDA GPU, as torch users name it). A study is filed under the profile they resolve to.
LOCAL_NAMES = ("auto", "cuda")


def get_profile(name: str) -> DeviceProfile:
    """The profile called ``name``; raises :class:`UnknownNameError` listing the valid ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownNameError("device", name, [*PROFILES, *LOCAL_NAMES]) from None


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def cpu_threads() -> int:
    """The cores this process may run on: its affinity where the OS says, and its cgroup's CPU quota (a container's
    ``--cpus``, a CI job's limit) rounded down. More threads than the quota run at full speed for part of each
    period and are then held: a 1-CPU quota on 2 cores timed an 800x800 product on 2 threads at 121 a second (the
    median run), where 1 thread sustains 63."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return cores if quota is None else max(1, min(cores, int(quota)))


#: Where the cgroup file systems are mounted (a test points it elsewhere), and this process's memberships.
CGROUP_ROOT, PROC_CGROUP = Path("/sys/fs/cgroup"), Path("/proc/self/cgroup")


def cgroup_cpu_quota() -> float | None:
    """The CPUs a period of this process's cgroup, and of each above it, allows at most; None where none is set.

    Read from cgroup v2's ``cpu.max`` ("200000 100000": 2 CPUs) and v1's ``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us`` (-1: no quota), from the process's own cgroup up to the root."""
    try:
        memberships = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return None
    found = []
    for line in memberships:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0":  # v2: one tree, at the root or, beside v1 trees, under unified/
            bases = [(CGROUP_ROOT / folder, "cpu.max") for folder in ("", "unified")]
        elif "cpu" in controllers.split(","):
            bases = [(CGROUP_ROOT / folder, "cpu.cfs_quota_us") for folder in (controllers, "cpu", "cpu,cpuacct")]
        else:
            continue
        parts = [part for part in path.split("/") if part]
        for base, name in bases:
            for depth in range(len(parts), -1, -1):
                folder = base.joinpath(*parts[:depth])
                try:
                    if name == "cpu.max":
                        quota, _, period = (folder / name).read_text().partition(" ")
                    else:
                        quota, period = (folder / name).read_text(), (folder / "cpu.cfs_period_us").read_text()
                    if quota.strip() not in ("max", "-1") and float(period) > 0:
                        found.append(float(quota) / float(period))
                except (OSError, ValueError):
                    continue
    return min(found) if found else None


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _matches(pattern: str, name: str) -> bool:
    """``pattern`` as a whole word of the driver's name: "H200" names an H200, not a GH200."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(pattern)}(?![A-Za-z0-9])", name, re.IGNORECASE) is not None


def derived_profile_name(name: str) -> str:
    """The profile name of a GPU without a named profile, from the driver's name alone.

    Both detection paths (torch, and the driver's files that ``load_config``
    reads) know the name, so a study and its export agree on it:
    "NVIDIA L4" -> ``cuda-nvidia-l4``.
    """
    return "cuda-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu")


def _device_text(name: Any) -> str:
    """A device's name as given from Python: a string, or a TypeError that says so (not "'NoneType' object has
    no attribute 'lower'" from inside)."""
    if not isinstance(name, str):
        raise TypeError(f"device must be a device's name, e.g. 'cpu', 'h100' or 'auto', not {name!r}")
    return name


def filed_under(name: str, use_torch: bool = True) -> str:
    """The device name a study of ``--device name`` is filed under: the profile of this machine's device for
    ``auto`` and ``cuda``, else ``name`` as :func:`filed_device_name` checks it (the device need not be here).
    ``use_torch=False`` finds this machine's device from the driver's files (``load_config`` imports no torch).
    A name is read in any case (``H100``, as the card is called)."""
    name = _device_text(name).lower()
    return resolve_device(name, use_torch).profile.name if name in LOCAL_NAMES else filed_device_name(name)


def filed_device_name(name: str) -> str:
    """``name``, once checked as a name studies and exports are filed under, without the device being here.

    A profile, or a GPU's derived name: a study tuned on an L4 is reported
    from any machine as ``--device cuda-nvidia-l4``.
    """
    if name in PROFILES or re.fullmatch(r"cuda-[a-z0-9]+(?:-[a-z0-9]+)*", name):
        return name
    if index := re.fullmatch(r"cuda:(\d+)", name):  # torch's spelling of one GPU: a kind of device is asked here
        raise UnknownNameError("device", name, [*PROFILES, *LOCAL_NAMES],
                               hint=f"A device here is a kind, not one GPU: give cuda (or the GPU's profile) and pick "
                                    f"GPU {index[1]} with CUDA_VISIBLE_DEVICES={index[1]}")
    raise UnknownNameError("device", name, [*PROFILES, *LOCAL_NAMES],
                           hint="A GPU without a profile goes by its derived name, as `autotune devices` shows it "
                                "(cuda-nvidia-l4)")


def _profile_for_cuda_name(name: str, capability: tuple[int, int] | None) -> DeviceProfile:
    for profile in PROFILES.values():
        if any(_matches(pattern, name) for pattern in profile.name_patterns):
            return profile
    # An NVIDIA GPU without a named profile: derive what we can from its compute capability.
    # Without one (the driver's files do not say it), only what every CUDA GPU has.
    major = capability[0] if capability else 0
    caps = set(_CUDA_COMMON) - {"compile"}
    if major >= 7:
        caps |= {"fp16_tensor_cores", "compile"}  # Triton, which torch.compile needs, wants sm70+
    if major >= 8:
        caps |= {"bf16", "tf32", "flash_attention", "cudnn_attention"}
    return DeviceProfile(derived_profile_name(name), "cuda", f"{name} (no named profile)", frozenset(caps), None,
                         capability)


def _cuda_devices_from_torch() -> list[DetectedDevice]:
    import torch

    found = []
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            capability = (props.major, props.minor)
            found.append(
                DetectedDevice(
                    _profile_for_cuda_name(props.name, capability),
                    props.name,
                    props.total_memory,
                    index,
                    {"compute_capability": f"{props.major}.{props.minor}"},
                )
            )
    return found


def _visible(index: int, uuid: str | None) -> int | None:
    """Where GPU ``index`` (by the driver's order) appears under ``CUDA_VISIBLE_DEVICES``; None when hidden."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return index
    for position, entry in enumerate(e.strip() for e in visible.split(",")):
        if entry.isdigit() and int(entry) == index:
            return position
        if uuid and entry and uuid.lower().startswith(entry.lower()):
            return position
        if not entry or (not entry.isdigit() and not entry.upper().startswith(("GPU-", "MIG-"))):
            break  # CUDA stops at the first entry it cannot read
    return None


def _cuda_devices_from_driver(root: Path = Path("/proc/driver/nvidia/gpus")) -> list[DetectedDevice]:
    # Linux NVIDIA drivers describe each GPU here; reading it avoids importing torch.
    # CUDA_VISIBLE_DEVICES is honoured as CUDA would: only the GPUs it names, in its order.
    found = []
    if root.is_dir():
        for index, entry in enumerate(sorted(root.iterdir())):
            try:
                info = (entry / "information").read_text()
            except OSError:
                continue
            fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in info.splitlines())}
            model = fields.get("Model") or "NVIDIA GPU"
            position = _visible(index, fields.get("GPU UUID"))
            if position is not None:
                found.append(DetectedDevice(_profile_for_cuda_name(model, None), model, None, position))
    return sorted(found, key=lambda d: d.index or 0)


def detect(use_torch: bool = True) -> list[DetectedDevice]:
    """Every device this machine offers, accelerators first, the CPU last.

    With ``use_torch=False`` (used by :func:`autotune.load_config`) torch is not
    imported unless it already is: NVIDIA GPUs are read from the driver's files.
    Nor is it where its build is CPU-only (off macOS): it would find no accelerator.
    """
    devices: list[DetectedDevice] = []
    if "torch" in sys.modules or (use_torch and not _torch_sees_only_the_cpu()):
        try:
            import torch
        except Exception as exc:  # noqa: BLE001 - a broken install: one line, not an ImportError's traceback
            raise DeviceUnavailableError(f"torch cannot be imported ({said(exc)}), and GPUs are "
                                         f"found through it; check that `{sys.executable} -c 'import torch'` "
                                         "works") from None
        devices += _cuda_devices_from_torch()
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            devices.append(DetectedDevice(PROFILES["mps"], "Apple GPU (MPS)", _physical_memory()))
    elif not use_torch:
        devices += _cuda_devices_from_driver()
        if sys.platform == "darwin" and platform.machine() == "arm64":
            devices.append(DetectedDevice(PROFILES["mps"], "Apple GPU (MPS)", _physical_memory()))
    # Triton builds a C launcher for each kernel: with $CC, else gcc, else clang (triton/runtime/build.py).
    if not shutil.which(os.environ.get("CC") or "gcc") and (os.environ.get("CC") or not shutil.which("clang")):
        devices = [replace(d, profile=replace(d.profile, capabilities=d.profile.capabilities - {"compile"},
                                              lacks=(("compile", NO_CC),)))
                   if d.profile.kind == "cuda" and d.profile.has("compile") else d for d in devices]
    have, lacks = _software()
    cpu = replace(PROFILES["cpu"], capabilities=PROFILES["cpu"].capabilities - {"compile"} | have
                  | _cpu_hardware_capabilities(), lacks=lacks)
    devices.append(DetectedDevice(cpu, cpu_name(), _physical_memory(), None, {"threads": cpu_threads()}))
    return devices


def _torch_sees_only_the_cpu(version_file: Path | None = None) -> bool:
    """Whether torch is a CPU-only build (its ``version.py`` names no CUDA and no ROCm) off macOS (MPS): then it
    finds no accelerator, and :func:`detect` need not import it (3.5 s on a slow 2-core CPU) to say so. Read, not
    imported; anything unexpected says False, and torch is asked."""
    if version_file is None:
        spec = importlib.util.find_spec("torch")  # finds the package without importing it
        if sys.platform == "darwin" or spec is None or not spec.submodule_search_locations:
            return False
        version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    from autotune.registry import literals

    try:
        stated = literals(ast.parse(version_file.read_text(encoding="utf-8")).body)  # `cuda: Optional[str] = None`
    except (OSError, SyntaxError, ValueError):
        return False
    return all(name in stated and stated[name] is None for name in ("cuda", "hip"))  # not a literal: not None


def _cpu_hardware_capabilities(cpuinfo: str | None = None) -> frozenset[str]:
    """bf16 when the processor has bfloat16 arithmetic (x86 AVX512-BF16 or AMX-BF16, Arm's BF16 extension).

    Elsewhere torch emulates bfloat16, an order of magnitude slower than
    float32 (measured on this project's AVX2 CPU): not worth a trial.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return frozenset({"bf16"}) if sys.platform == "darwin" and platform.machine() == "arm64" else frozenset()
    flags = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags |= set(value.split())
    return frozenset({"bf16"}) if flags & {"avx512_bf16", "amx_bf16", "bf16"} else frozenset()


def _software() -> tuple[frozenset[str], tuple[tuple[str, str], ...]]:
    """The CPU's capabilities that come from installed software rather than the hardware, and those missing, each
    with why: numba, and the C++ compiler torch.compile's CPU backend runs ($CXX, else g++, clang++ on macOS; a
    container image without one failed every compiled trial, InvalidCxxCompiler, 8 s into each for ten at tiny)."""
    compiler = os.environ.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")
    have = {"numba": importlib.util.find_spec("numba") is not None, "compile": shutil.which(compiler) is not None}
    return (frozenset(name for name, found in have.items() if found),
            tuple((name, {"numba": NO_NUMBA, "compile": NO_CXX}[name]) for name, found in have.items() if not found))


def resolve_device(name: str = "auto", use_torch: bool = True) -> DetectedDevice:
    """The device to tune for: ``auto`` takes the first accelerator, else the CPU; ``cuda`` the first CUDA GPU.

    Naming a profile this machine does not have raises
    :class:`DeviceUnavailableError` with what was found instead.
    """
    name = _device_text(name).lower()  # --device H100, as the card is called
    if name not in LOCAL_NAMES:
        filed_device_name(name)  # an unknown name is refused before detection, which imports torch (seconds)
    found = detect(use_torch and name != "cpu")  # the CPU's entry is the same without torch: only GPUs need it
    if name == "auto":
        return found[0]
    if name == "cuda":
        for device in found:
            if device.profile.kind == "cuda":
                return device
        raise _not_here("--device cuda names a CUDA GPU and this machine has none", found)
    for device in found:  # a GPU without a named profile goes by its derived name (cuda-nvidia-l4)
        if device.profile.name == name and name not in PROFILES:
            return device
    profile = get_profile(name)
    for device in found:
        if device.profile.name == profile.name:
            return device
    raise _not_here(f"device {name!r} ({profile.description}) is not on this machine", found)


def _not_here(what: str, found: list[DetectedDevice]) -> DeviceUnavailableError:
    """``what``, then the devices this machine has and the names that pick them."""
    summary = ", ".join(f"{d.profile.name} ({d.name})" for d in found)
    choices = ", ".join(dict.fromkeys(d.profile.name for d in found))
    return DeviceUnavailableError(f"{what}; found: {summary}. Use --device auto or one of: {choices}")
