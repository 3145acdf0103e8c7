"""A plain (non-editable) install finds its search spaces, workloads and presets."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_spaces_and_workloads_and_they_load_from_it(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), str(ROOT)],
        check=True, capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("autotune-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("search_spaces/chmm.yaml", "workloads/chmm.py", "autotune/cli.py", "autotune/py.typed",
                   "studies/presets/__init__.py"):
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
    )
    # Run outside the checkout, with only the installed copy on the path.
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
