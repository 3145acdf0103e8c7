"""A plain (non-editable) install finds its search spaces, workloads and presets."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _source_copy(target: Path) -> Path:
    """The checkout without what a build or a run left in it: setuptools puts a ``build/`` folder's stale copies
    into the wheel, so a file deleted from the checkout would still ship (and this test would not see it)."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        left = {"build", "dist", ".git", ".whl", ".gl", "test-artifacts", "__pycache__", ".pytest_cache"}
        if Path(folder) == ROOT / "studies":  # the user's own studies; only the presets ship
            left |= set(names) - {"presets"}
        return {name for name in names if name in left or name.endswith(".egg-info")}

    shutil.copytree(ROOT, target, ignore=ignore)
    return target


def test_wheel_ships_spaces_and_workloads_and_they_load_from_it(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"),
         str(_source_copy(tmp_path / "src"))],
        check=True, capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("autotune-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("search_spaces/chmm.yaml", "workloads/chmm.py", "autotune/cli.py", "autotune/py.typed",
                   "studies/presets/__init__.py", "studies/presets/lsd/h100-full.json"):
        assert needed in names, needed
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = (
        "import autotune, workloads.chmm\n"
        "from autotune.registry import space_path\nfrom autotune.space import load_space\n"
        "assert load_space('chmm').baseline['indices'] == 'per_step'\n"
        f"assert str(space_path('chmm')).startswith({str(target)!r}), space_path('chmm')\n"
        f"assert workloads.chmm.__file__.startswith({str(target)!r})\n"
        # a preset measured on an H100 ships in the package: found on any machine, from the installed copy
        f"cfg = autotune.load_config('lsd', device='h100', strict=True, studies={str(tmp_path / 'none')!r})\n"
        f"assert cfg.source.startswith({str(target)!r}) and cfg['precision'] == 'amp_fp16', cfg.source\n"
    )
    # Run outside the checkout, with only the installed copy on the path.
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
