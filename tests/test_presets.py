"""The presets shipped under studies/presets: measured on a GPU, found on any machine, and each one honest.

A preset is an export of a search run on a GPU (benchmarks/gpu_campaign.py; the runs that made them are in
benchmarks/gpu_runs/). It tells every user of that device what to run, so each must say where it was measured,
pass its check, beat the baseline it was re-measured beside, and be a config the space (at its size) allows.
"""

import json
from pathlib import Path

import pytest

import autotune
from autotune.devices import PROFILES
from autotune.registry import get_workload_class
from autotune.space import load_space

PRESETS = Path(__file__).resolve().parent.parent / "studies" / "presets"
FILES = sorted(PRESETS.glob("*/*.json"))


def test_the_gpu_campaigns_shipped_a_preset_of_every_workload():
    names = {f"{p.parent.name}/{p.name}" for p in FILES}
    assert {"chmm/h100-small.json", "lsd/h100-full.json", "ten/h100-small.json", "latentwire/h100-small.json",
            "vlm_mc/h200-small.json", "chmm/h200-small.json", "lsd/h200-small.json", "ten/h200-small.json",
            "latentwire/h200-small.json"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_preset_says_where_it_was_measured_and_is_an_honest_winner(path):
    document = json.loads(path.read_text())
    workload, (device, _, size) = path.parent.name, path.stem.partition("-")
    assert (document["workload"], document["device"], document["size"]) == (workload, device, size)
    # Measured on the workload as it is: a version bump (new data or outputs) needs the preset measured again.
    assert document["workload_version"] == get_workload_class(workload).version
    environment = document["environment"]
    for key in ("device_name", "compute_capability", "torch", "cuda"):
        assert environment.get(key), key  # the fingerprint a user compares with their own machine
    assert document["check"]["passed"] is True
    assert document["speedup"] > 1
    space = load_space(workload).for_device(PROFILES[device]).for_size(get_workload_class(workload).sizes[size], size)
    config = space.allowed(document["config"])
    # A preset that names the baseline would tell users to run the slow config.
    assert config != space.baseline
    assert space.complete(document["baseline"]["config"]) == space.baseline


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_load_config_finds_a_preset_on_any_machine(path, tmp_path):
    workload, (device, _, size) = path.parent.name, path.stem.partition("-")
    # no study of its own here; the size named, since a device may ship several (without it the largest loads)
    cfg = autotune.load_config(workload, device=device, size=size, strict=True, studies=tmp_path)
    assert Path(cfg.source) == path
    assert dict(cfg) == json.loads(path.read_text())["config"]


def test_an_install_without_the_presets_loads_the_defaults_with_its_warning(tmp_path, monkeypatch):
    # A layout of another kind where the import system finds no `studies` package: no preset, no ModuleNotFoundError.
    import autotune.tuned as tuned

    def no_presets(name):
        raise ModuleNotFoundError(f"No module named {name.partition('/')[0]!r}")

    monkeypatch.setattr(tuned, "folder", no_presets)
    with pytest.warns(UserWarning, match="^no tuned config for 'chmm' on 'h100' .*; using the search space's "
                                         "defaults$"):
        cfg = autotune.load_config("chmm", device="h100", size="small", studies=tmp_path)
    assert cfg.source == "defaults"


def shipped_table_rows() -> list[str]:
    """The rows of the README's table of the shipped presets, one a preset."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    start = readme.index("### The shipped presets\n")
    section = readme[start:readme.index("\n### ", start + 1)]
    table = [line for line in section.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| device | workload | size |") and table[1].startswith("| --- |"), table[:2]
    return table[2:]


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_readmes_gpu_table_states_each_presets_figures(path):
    # The README's table and the shipped files must not drift apart: the preset's row is its re-measurement.
    document = json.loads(path.read_text())
    rows = [line for line in shipped_table_rows()
            if line.startswith(f"| {document['device'].upper()} | {document['workload']} | {document['size']} ")]
    assert len(rows) == 1, f"{len(rows)} README rows of {document['workload']} at {document['size']} on the " \
                           f"{document['device']}"
    row = rows[0]
    assert f"| {document['speedup']:.1f}x |" in row, row
    assert f"| {document['measured']['peak_memory_bytes'] / 2**30:.2f} GiB |" in row, row


def test_the_readmes_gpu_table_has_a_row_for_shipped_presets_alone():
    # A preset removed (or never committed) must not keep a row that tells users it exists.
    named = [tuple(cell.split()[0] for cell in row.strip("|").split("|")[:3]) for row in shipped_table_rows()]
    shipped = [(path.stem.rsplit("-", 1)[0].upper(), path.parent.name, path.stem.rsplit("-", 1)[1]) for path in FILES]
    assert sorted(named) == sorted(shipped)
