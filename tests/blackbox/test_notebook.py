"""``es.minimize(..., workers=N)`` where users run it: a Jupyter kernel started from the venv's
Python, ``.venv/bin/python script.py``, ``python - < script.py``, all without the venv's
``bin/`` (where the mpich wheel puts ``mpiexec``) on PATH; unguarded scripts; no launcher at
all; a worker interpreter that never starts. Each case must finish or fail within a bound."""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import BIN

OBJECTIVE = """\
import numpy as np


def shifted_sphere(x):
    return float(np.sum((x - 0.5) ** 2))
"""

# No ``if __name__ == "__main__":`` guard, on purpose: its top level must run once, not once
# more in every worker. ``objective`` lies beside the script: the workers must find it too.
SCRIPT = """\
import numpy as np
import es
from objective import shifted_sphere

print("START", flush=True)
kwargs = dict(x0=np.zeros(5), sigma0=0.3, seed=2, max_generations=20)
one = es.minimize(shifted_sphere, **kwargs)
two = es.minimize(lambda x: shifted_sphere(x), workers=2, **kwargs)
same = np.array_equal(one.x, two.x) and one.fun == two.fun and one.nfev == two.nfev
print("SAME" if same else "DIFFERENT", two.fun, flush=True)
"""


def bare_env(**extra: str) -> dict[str, str]:
    """This environment as a registered kernel or an IDE sees it: the venv not activated, so
    no ``mpiexec`` on PATH, and not under an MPI launcher."""
    folders = [folder for folder in os.environ.get("PATH", "").split(os.pathsep)
               if folder and not shutil.which("mpiexec", path=folder)]
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PMI_", "PMIX_", "OMPI_", "HYDRA_", "MPI_"))
           and key not in ("ES_COMM", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(folders or ["/usr/bin", "/bin"])
    assert shutil.which("mpiexec", path=env["PATH"]) is None
    return env | extra


def run_bounded(command: list[str], cwd: Path, env: dict[str, str], timeout: float,
                stdin: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``command``; past ``timeout`` kill its whole process group. Output goes through
    files: mpiexec and its workers would hold pipes open after the command has ended."""
    out, err = cwd / "command.out", cwd / "command.err"
    with out.open("w") as stdout, err.open("w") as stderr, \
            (stdin or Path(os.devnull)).open() as source:
        child = subprocess.Popen(command, cwd=cwd, env=env, stdin=source, stdout=stdout,
                                 stderr=stderr, text=True, start_new_session=True)
    try:
        returncode = child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        with contextlib.suppress(ProcessLookupError):  # the command, mpiexec and its proxy
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    done = subprocess.CompletedProcess(command, returncode, out.read_text(), err.read_text())
    assert returncode is not None, f"no answer within {timeout} s: {done.stderr[-2000:]}"
    return done


def project(tmp_path: Path) -> Path:
    (tmp_path / "objective.py").write_text(OBJECTIVE)
    (tmp_path / "script.py").write_text(SCRIPT)
    return tmp_path


def check_output(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines.count("START") == 1, done.stdout  # the workers did not re-run the script
    assert [line.split()[0] for line in lines] == ["START", "SAME"], done.stdout + done.stderr


def activated_env() -> dict[str, str]:
    """As after ``source .venv/bin/activate``: the venv's ``bin/`` first on PATH."""
    return bare_env(PATH=f"{BIN}{os.pathsep}{bare_env()['PATH']}")


@pytest.mark.parametrize("env", [bare_env, activated_env])
def test_an_unguarded_script_run_by_the_venv_python_runs_once(tmp_path, env):
    done = run_bounded([sys.executable, "script.py"], project(tmp_path), env(), timeout=60)
    check_output(done)


@pytest.mark.parametrize("env", [bare_env, activated_env])
def test_a_script_read_from_stdin(tmp_path, env):
    folder = project(tmp_path)
    done = run_bounded([sys.executable, "-"], folder, env(), timeout=60,
                       stdin=folder / "script.py")
    check_output(done)


def test_workers_from_a_jupyter_kernel_without_the_venv_on_path(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    spec = tmp_path / "jupyter" / "kernels" / "es-venv"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({  # this venv's Python, as `ipykernel install`
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "es (venv)", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    (tmp_path / "objective.py").write_text(OBJECTIVE)
    cell = textwrap.dedent("""\
        import json, shutil, sys, time
        import numpy as np
        import es
        from objective import shifted_sphere
        launcher_at_start = shutil.which("mpiexec")
        offset = 0.5
        fun = lambda x: float(np.sum((x - offset) ** 2))  # defined in the notebook
        kwargs = dict(x0=np.zeros(5), sigma0=0.3, seed=2, max_generations=20)
        one = es.minimize(fun, **kwargs)
        started = time.perf_counter()
        two = es.minimize(fun, workers=2, **kwargs)
        seconds = time.perf_counter() - started
        three = es.minimize(shifted_sphere, workers=2, **kwargs)  # a second spawn, a module's
        print(json.dumps({"executable": sys.executable,
                          "mpiexec": [launcher_at_start, shutil.which("mpiexec")],
                          "same": bool(np.array_equal(one.x, two.x) and one.fun == two.fun
                                       and np.array_equal(one.x, three.x)),
                          "seconds": seconds}))
    """)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell)])
    client = nbclient.NotebookClient(notebook, kernel_name="es-venv", timeout=60,
                                     startup_timeout=60,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=bare_env(IPYTHONDIR=str(tmp_path / "ipython")))
    outputs = notebook.cells[0].outputs
    text = "".join(output.get("text", "") for output in outputs if output.output_type == "stream")
    report = json.loads(text.strip().splitlines()[-1])
    assert report["executable"] == sys.executable
    assert report["mpiexec"] == [None, None]  # not on the kernel's PATH, before or after
    assert report["same"], report
    print(f"workers=2 from the kernel: {report['seconds']:.2f} s")


def fake_venv(tmp_path: Path) -> Path:
    """A venv like this one but without the mpich wheel's ``mpiexec`` beside its Python."""
    root = tmp_path / "venv"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(sys.executable)
    (root / "lib").symlink_to(Path(sys.prefix) / "lib")
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", root / "pyvenv.cfg")
    return root / "bin" / "python"


@pytest.mark.skipif(not (Path(sys.prefix) / "pyvenv.cfg").is_file(), reason="needs a venv")
def test_no_launcher_anywhere_fails_at_once_with_what_to_do(tmp_path):
    python = fake_venv(tmp_path)
    probe = "import sys, shutil; print(sys.executable, shutil.which('mpiexec'))"
    seen = subprocess.run([str(python), "-c", probe], env=bare_env(), capture_output=True,
                          text=True, timeout=30).stdout.split()
    assert seen == [str(python), "None"]
    project(tmp_path)
    started = time.perf_counter()
    done = run_bounded([str(python), "script.py"], tmp_path, bare_env(), timeout=30)
    assert time.perf_counter() - started < 20
    assert done.returncode == 1 and done.stdout.splitlines() == ["START"]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("es.parallel.evaluate.WorkerStartError: workers=2 needs mpiexec"), \
        done.stderr
    for advice in ("activate", "PATH", "workers=1", "mpiexec -n"):
        assert advice in last
    assert "Assertion failed" not in done.stderr


def test_workers_that_never_start_fail_within_the_bound_and_the_caller_can_spawn_again(
        tmp_path):
    """A worker interpreter that exits at once leaves MPI_Comm_spawn waiting forever: the
    caller gets an error after ``SPAWN_TIMEOUT_S`` instead of a hung cell, and its next
    ``workers=2`` call works (the spawn that hung was the broker's, not the caller's)."""
    broken = tmp_path / "broken-python"  # starts the broker, not the workers
    broken.write_text(f"#!/bin/sh\ncase \"$*\" in *es.parallel.broker*) exec {sys.executable} "
                      f"\"$@\";; esac\nexit 3\n")
    broken.chmod(0o755)
    script = tmp_path / "spawn.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        import numpy as np
        import es, es.parallel.evaluate
        es.parallel.evaluate.SPAWN_TIMEOUT_S = 3
        sphere = lambda x: float(np.sum(x**2))
        sys.executable = {str(broken)!r}  # the interpreter the workers are started with
        try:
            es.minimize(sphere, np.zeros(2), workers=2)
        except es.parallel.evaluate.WorkerStartError as error:
            print("ERROR", error, flush=True)
        sys.executable = {sys.executable!r}
        print("AGAIN", es.minimize(sphere, np.zeros(2), workers=2, max_generations=2).ngen)
    """))
    done = run_bounded([sys.executable, str(script)], tmp_path, activated_env(), timeout=40)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ERROR the 2 MPI workers did not start within 3 s "
        f"({broken} -m mpi4py.futures.server); use workers=1 or run under mpiexec -n N",
        "AGAIN 2"], done.stdout + done.stderr


CRASHING = """\
import ctypes, sys
import numpy as np
import es
from es.parallel.evaluate import WorkerDiedError

def crashing(x):
    if x[0] > 0.5:
        {crash}
    return float(np.sum(x ** 2))

try:
    es.minimize(crashing, np.zeros(3), 1.0, workers=2, seed=0, max_evals=200)
except WorkerDiedError as error:
    print("DIED", error, flush=True)
    print("CAUSE", repr(str(error.__cause__)), flush=True)
print("AGAIN", es.minimize(lambda x: float(np.sum(x ** 2)), np.zeros(3), workers=2,
                           max_generations=2).ngen, flush=True)
"""


@pytest.mark.parametrize("crash", ["ctypes.string_at(0)", "import os; os._exit(3)"])
def test_a_worker_that_dies_is_an_exception_not_the_callers_death(tmp_path, crash):
    """MPICH ends every process of a job when one dies: the workers' job must not hold the
    caller (a notebook's kernel restarted, with no exception and no ``finally``)."""
    (tmp_path / "crash.py").write_text(CRASHING.format(crash=crash))
    done = run_bounded([sys.executable, "crash.py"], tmp_path, activated_env(), timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    died, cause, again = done.stdout.splitlines()
    assert died.startswith("DIED a worker of workers=2 died while evaluating"), died
    assert "this process is unharmed" in died
    assert again == "AGAIN 2"
    # Where in fun: the worker's faulthandler traceback, as the exception's cause. On standard
    # error it went through MPICH's forwarding, which the dying job cut (a CI run: 'File "').
    if crash.startswith("ctypes"):
        assert "Fatal Python error: Segmentation fault" in cause, cause
        assert re.search(r'File "[^"]*", line 8 in crashing', cause), cause
    else:
        assert cause == "CAUSE 'None'" and "(the worker wrote no traceback)" in died, (
            cause, died)
