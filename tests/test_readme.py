"""The README's commands work: every line of its ``bash`` blocks and its Python example run here,
in order, from a scratch folder (with ``configs/`` linked in), the way a reader pastes them.

Each README command needs an entry in ``CHECKS`` saying how it runs here: as written, or
with a shorter budget, or (the quick start's install lines) by CI itself. A command the README
gains without an entry fails the first test, so README and checks cannot drift apart. The
docs' config reference is checked against the code the same way."""

import functools
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import BIN, ONE_WORKER, REPO

from es.parallel.fake_cluster import ClusterError
from es.parallel.slurm_cluster import check_can_run as check_slurm

README = (REPO / "README.md").read_text()
CI_RUN = (REPO / ".ci/run").read_text()

TINY_HUMANOID = ("--set es.population=4 --set es.noise_table_size=1000000 --set "
                 "run.generations=1 --set env.max_episode_steps=20 --set run.eval_episodes=1")
UNDER_SLURM = f"python {REPO}/scripts/slurm_cluster.py --nodes 1 --cpus-per-node 2 --"
try:
    check_slurm()
    SLURM = True
except ClusterError:
    SLURM = False

#: How each README command is checked: "as written", a replacement command (a shorter budget,
#: a launcher this machine has), "ci" (the test command: `.ci/run` runs it), "server", or a
#: pair (the replacement under a real Slurm, the one without: None leaves it to
#: tests/parallel/test_slurm.py).
CHECKS = {
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[video,plot,'
    'tensorboard]" && mpiexec -n 2 es-train configs/cartpole.toml --run-dir runs/quickstart '
    '--force': "mpiexec -n 2 es-train configs/cartpole.toml --run-dir runs/quickstart --force",
    'python3 -m venv .venv && . .venv/bin/activate && pip install -q -e ".[test]" && ruff '
    'check es tests scripts examples && lint-imports && python -m pytest -q': "ci",
    "es-train configs/pendulum.toml --set run.generations=20 --run-dir runs/pendulum":
        "es-train configs/pendulum.toml --set run.generations=5 --run-dir runs/pendulum",
    "mpiexec -n 2 es-train configs/hopper_ars.toml --set run.max_seconds=60 --run-dir "
    "runs/hopper --tensorboard":
        "mpiexec -n 2 es-train configs/hopper_ars.toml --set run.max_seconds=3 --run-dir "
        "runs/hopper --tensorboard",
    "tensorboard --logdir runs/hopper/tb": "server",
    "es-eval runs/hopper --episodes 10": "as written",
    "es-eval runs/hopper --episodes 10 --policy best": "as written",
    "es-eval runs/hopper --episodes 10 --random": "as written",
    # A MuJoCo video films ~90 ms a frame in software: 25 steps, not the whole 1,000.
    "es-eval runs/hopper --episodes 1 --video hopper.mp4":
        "es-eval runs/hopper --episodes 1 --video hopper.mp4 --video-steps 25",
    "mpiexec -n 3 es-train --resume runs/hopper --set run.max_seconds=90":
        "mpiexec -n 3 es-train --resume runs/hopper --set run.max_seconds=5",
    # Under the real Slurm of tests/parallel/test_slurm.py where it can run, the same program
    # with mpiexec where it cannot; tiny either way.
    "srun --mpi=pmi2 -n 64 es-train configs/humanoid.toml": (
        f"{UNDER_SLURM} srun --mpi=pmi2 -n 2 es-train configs/humanoid.toml {TINY_HUMANOID} "
        "--run-dir runs/humanoid",
        f"mpiexec -n 2 es-train configs/humanoid.toml {TINY_HUMANOID} --run-dir runs/humanoid"),
    "sbatch scripts/slurm_train.sbatch configs/humanoid.toml runs/humanoid": (
        f"{UNDER_SLURM} sbatch --wait --nodes=1 --ntasks-per-node=2 --time=5 --output=sbatch.out "
        f"{REPO}/scripts/slurm_train.sbatch configs/humanoid.toml runs/humanoid-sbatch "
        f"{TINY_HUMANOID}", None),
    # A hostfile of this machine alone, and tiny; the namespaced hosts' losses are
    # tests/parallel/test_elastic.py's.
    "es-train configs/humanoid_ars.toml --resume-or-start runs/humanoid --elastic --hostfile "
    "hosts --min-nodes 2":
        "echo localhost:2 > hosts && es-train configs/humanoid_ars.toml --resume-or-start "
        f"runs/humanoid-elastic --elastic --hostfile hosts --min-nodes 1 {TINY_HUMANOID} "
        "--set ars.top=2",
    "es-baseline dqn configs/baselines/cartpole_dqn.toml --set run.generations=20 --run-dir "
    "runs/dqn": "as written",
    "es-compare --env CartPole-v1 --budget-s 10 --seeds 0-1 --jobs 2 --out runs/compare":
        "es-compare --env CartPole-v1 --budget-s 3 --seeds 0 --jobs 2 --out runs/compare",
    "mpiexec -n 2 es-train configs/cartpole.toml --set policy.kind=examples.torch_policies:mlp "
    "--run-dir runs/torch":
        "mpiexec -n 2 es-train configs/cartpole.toml --set policy.kind=examples.torch_policies:mlp "
        "--run-dir runs/torch --set run.generations=8",
    "es-eval runs/torch --episodes 1 --video torch.mp4":
        "es-eval runs/torch --episodes 1 --video torch.mp4 --video-steps 25",
}


def readme_commands() -> list[str]:
    """The lines of the README's bash blocks (comments dropped, continuations joined)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line and not line.startswith("#"):
                commands.append(" ".join(line.split()))
    return commands


def python_example() -> str:
    (block,) = re.findall(r"```python\n(.*?)```", README, re.S)
    return block


def test_every_readme_command_has_a_check():
    assert readme_commands(), "no bash blocks found"
    assert [c for c in readme_commands() if c not in CHECKS] == []
    assert [c for c in CHECKS if c not in readme_commands()] == []
    # The test command is exactly what CI runs.
    (test_command,) = [c for c, how in CHECKS.items() if how == "ci"]
    assert test_command in CI_RUN


def test_the_quick_start_takes_the_users_python_and_ci_also_tries_the_newest():
    """A machine with Python 3.12 or 3.13 and no 3.11 can paste the quick start: it names
    ``python3``, not a minor version; ``requires-python`` says which versions work, and CI
    runs the quick start's training on the newest Python it finds, so a break there shows."""
    for command in CHECKS:
        assert not re.search(r"python3\.\d+", command), command
        if "-m venv" in command:
            assert command.startswith("python3 -m venv .venv")
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.11"' in pyproject
    assert "Python (3.11 or newer" in README
    assert "for minor in 14 13 12" in CI_RUN and "es-train configs/cartpole.toml" in CI_RUN


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "PMI_SIZE", "ES_COMM")}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"  # as with the venv activated
    # A session of its own: on a timeout the whole command goes, not just its shell (a
    # scripts/slurm_cluster.py left behind would keep its daemons running).
    process = subprocess.Popen(command, shell=True, cwd=cwd, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 15)  # the cluster script tears down on SIGTERM
        process.communicate(timeout=60)
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _serve(command: str, cwd: Path) -> None:
    """Start the server the README names, read its run list, stop it."""
    port = 16006 + os.getpid() % 1000
    server = subprocess.Popen(f"{command} --host 127.0.0.1 --port {port}", shell=True,
                              cwd=cwd, env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, server.stderr.read()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs",
                                            timeout=5) as response:
                    if json.loads(response.read()):
                        return
            except (OSError, ValueError):
                pass
            assert time.monotonic() < deadline, f"{command}: nothing served within 90 s"
            time.sleep(0.5)
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


def scratch(tmp_path: Path) -> Path:
    """The reader's folder: ``configs/`` and ``examples/`` linked in."""
    (tmp_path / "configs").symlink_to(REPO / "configs")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    return tmp_path


def test_readme_commands_and_python_example_run(tmp_path):
    """Every command but the Slurm ones (the next test's), in order: later ones use the runs
    of earlier ones."""
    scratch(tmp_path)
    for command in readme_commands():
        how = CHECKS[command]
        if how in ("ci", "server") or isinstance(how, tuple):
            if how == "server":
                _serve(command, tmp_path)
            continue
        done = _run(command if how == "as written" else how, tmp_path)
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
    assert (tmp_path / "hopper.mp4").stat().st_size > 0
    assert (tmp_path / "torch.mp4").stat().st_size > 0
    assert list((tmp_path / "runs/hopper/tb").iterdir())
    assert (tmp_path / "runs/compare").is_dir()
    example = subprocess.run([sys.executable, "-c", python_example()], cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
    assert example.returncode == 0, example.stderr[-2000:]
    assert (tmp_path / "runs/notebook/policy.npz").is_file()


@ONE_WORKER  # under a real Slurm it builds a cluster: one after another with the others
def test_readme_slurm_commands_run(tmp_path):
    """The Slurm commands, which use no run of the others: under the real Slurm of
    tests/parallel/test_slurm.py where it can run, the same program under mpiexec where it
    cannot (or left to test_slurm.py: None)."""
    scratch(tmp_path)
    pairs = [(command, how) for command in readme_commands()
             if isinstance(how := CHECKS[command], tuple)]
    assert pairs
    for command, (under_slurm, without) in pairs:
        how = under_slurm if SLURM else without
        if how is not None:
            done = _run(how, tmp_path)
            assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"


def test_config_reference_matches_the_code():
    from es.cli.config_doc import with_reference

    text = (REPO / "docs/configuration.md").read_text()
    assert with_reference(text) == text, "run: python -m es.cli.config_doc docs/configuration.md"


def test_the_config_reference_generator_refuses_bad_input_in_one_line(tmp_path):
    """It ended in tracebacks: --help was taken for a file name, a missing file raised."""
    for args, said in ((["--help"], "usage: python -m es.cli.config_doc"),
                       ([str(tmp_path / "none.md")], "none.md: [Errno 2]"),
                       (["README.md"], "README.md: the markers")):
        done = subprocess.run([sys.executable, "-m", "es.cli.config_doc", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert "Traceback" not in done.stderr and said in done.stdout + done.stderr, done
        assert done.returncode == (0 if args == ["--help"] else 2)
        if done.returncode:
            assert done.stderr.count("\n") == 1, done.stderr
    assert (REPO / "README.md").read_text() == README  # refused: left as it was


@functools.cache
def heading_anchors(markdown: Path) -> set[str]:
    """The anchors GitHub gives a file's headings: lower case, every character but letters,
    digits, spaces, ``-`` and ``_`` dropped, spaces as ``-``."""
    headings = re.findall(r"^#+ (.+)$", markdown.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_readme_stays_short_and_its_links_resolve():
    """Every relative link of the README and docs/ names a file that exists and, with an
    anchor, one of that file's headings: a renamed heading would leave a dead link."""
    assert len(README.splitlines()) < 200
    for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target, anchor in re.findall(r"\]\(([^)#:]*)(?:#([^)]+))?\)", doc.read_text()):
            path = doc.parent / target if target else doc
            assert path.exists(), f"{doc.name}: {target}"
            if anchor:
                assert anchor in heading_anchors(path), f"{doc.name}: {target}#{anchor}"


def test_the_distribution_has_a_name_of_its_own_and_every_hint_uses_it():
    """PyPI's ``es`` is an unrelated event-sourcing package: ``pip install es`` must never be
    what a hint tells a user. The import name stays ``es``, the programs ``es-*``."""
    pyproject = (REPO / "pyproject.toml").read_text()
    (name,) = re.findall(r'^name = "(.+)"$', pyproject, re.M)
    assert name == "mpi-es"
    assert f"The distribution is `{name}`" in README
    hints = [hint for path in [*REPO.glob("es/**/*.py"), *REPO.glob("docs/*.md"),
                               *REPO.glob("scripts/*.py"), REPO / "README.md",
                               REPO / "pyproject.toml"]
             for hint in re.findall(r"""pip install (?:-\w+ )*['"`]?([\w-]+)\[""",
                                    path.read_text())]
    assert hints and set(hints) == {name}, hints
    assert re.search(rf'^test = \[.*"{name}\[', pyproject, re.M)  # the extras' own name
