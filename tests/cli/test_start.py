"""A Ctrl-C while an ``es-*`` program loads is one line and exit code 130, not a traceback of
imports (es.cli.start): a program module that interrupts itself while it is imported, or in
its ``main``, stands in for the user's timing."""

import os
import subprocess
import sys
import tomllib

import pytest
from conftest import REPO

PROGRAM = """
import os, signal, time
if {while_importing}:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)

def main():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
"""


@pytest.mark.parametrize(("while_importing", "rank", "said"), [
    (True, None, "es-x: interrupted while starting; nothing ran (exit code 130)\n"),
    (False, None, "es-x: interrupted on rank 0 (exit code 130)\n"),
    (True, "1", ""),  # under mpiexec every rank got the signal: rank 0 alone says so
    # Escaping main (a second signal on the way out, say): the rank says where it was.
    (False, "1", "es-x: interrupted on rank 1 (exit code 130)\n"),
])
def test_an_interrupt_while_a_program_starts_is_one_line(tmp_path, while_importing, rank, said):
    (tmp_path / "program_x.py").write_text(PROGRAM.format(while_importing=while_importing))
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "PMI_SIZE")}
    env["PYTHONPATH"] = str(tmp_path)
    if rank is not None:
        env["PMI_RANK"] = rank
    done = subprocess.run([sys.executable, "-c", "from es.cli.start import _start; "
                           "_start('program_x', 'es-x')"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)
    assert (done.returncode, done.stderr) == (130, said)


def test_every_console_script_starts_its_program_through_the_guard(monkeypatch):
    import importlib

    import es.cli.start as start

    with (REPO / "pyproject.toml").open("rb") as handle:
        scripts = tomllib.load(handle)["project"]["scripts"]
    started = []
    monkeypatch.setattr(start, "_start", lambda module, program: started.append((module,
                                                                                 program)))
    for name, entry in scripts.items():
        where, function = entry.split(":")
        assert where == "es.cli.start", name
        getattr(start, function)()
        module, program = started.pop()
        assert program == name and callable(importlib.import_module(module).main), name
