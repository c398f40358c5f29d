"""What the wheel carries: the package and the shipped configs, so that a ``pip install`` (not
the README's editable one) runs ``es-train cartpole`` or ``es-train configs/cartpole.toml``
from any folder, and ``es-bench suite suites/mujoco`` finds the configs its suite names."""

import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import REPO

from es.config import shipped_configs


@pytest.mark.skipif(not (REPO / ".git").exists(),
                    reason="builds the wheel from git's tracked files; this is no git checkout")
def test_the_wheel_carries_every_shipped_config(tmp_path):
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                             check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (REPO / name).is_symlink():
            target.symlink_to((REPO / name).readlink())
        elif (REPO / name).is_file():
            shutil.copy2(REPO / name, target)
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from setuptools import build_meta; "
         "print(build_meta.build_wheel(sys.argv[1]))", str(tmp_path / "dist")],
        cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = tmp_path / "dist" / done.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        carried = sorted(name.removeprefix("es/configs/").removesuffix(".toml")
                         for name in names if name.startswith("es/configs/"))
        assert carried == sorted(shipped_configs())
        assert (archive.read("es/configs/cartpole.toml")
                == (REPO / "configs/cartpole.toml").read_bytes())
    assert "es/cli/train.py" in names and not any(name.startswith("tests/") for name in names)
