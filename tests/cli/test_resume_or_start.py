"""One command line that starts a run or resumes it (``--resume-or-start``), the scheduler's
stop signals and ``srun``'s lone copies: what a batch script relies on, without Slurm (the
same under a real Slurm: tests/parallel/test_slurm.py)."""

import numpy as np
import pytest
from conftest import load_params, read_progress, run_cli

from es.parallel import comm as comm_module

CARTPOLE = ["configs/cartpole.toml", "--quiet"]


def test_the_same_line_starts_then_resumes_exactly(tmp_path):
    run_dir = tmp_path / "run"
    line = ["es-train", *CARTPOLE, "--resume-or-start", str(run_dir)]
    first = run_cli([*line, "--set", "run.generations=3"])
    assert first.returncode == 0, first.stderr
    again = run_cli([*line, "--set", "run.generations=6"], ranks=2)  # a resume may add more
    assert again.returncode == 0, again.stderr
    assert [int(r["generation"]) for r in read_progress(run_dir)] == list(range(1, 7))
    plain = run_cli(["es-train", *CARTPOLE, "--set", "run.generations=6", "--run-dir",
                     str(tmp_path / "plain")])
    assert plain.returncode == 0, plain.stderr
    assert np.array_equal(load_params(run_dir), load_params(tmp_path / "plain"))
    done = run_cli([*line, "--set", "run.generations=6"])  # finished: nothing left to train
    assert done.returncode == 0 and "done: 6 generations" in done.stdout


def test_one_line_continues_a_sweep_its_runs_and_the_ones_not_started(tmp_path):
    """A sweep's folder holds its runs' folders: the same line on every start of a batch job
    resumes the runs there, starts the others, and is refused up front for another config."""
    line = ["es-train", *CARTPOLE, "--resume-or-start", str(tmp_path / "sweep")]
    first = run_cli([*line, "--seeds", "0,1", "--set", "run.generations=2"])
    assert first.returncode == 0, first.stderr
    # Its folder given to --resume advised starting again with --force, which deleted its runs.
    parent = run_cli(["es-train", "--resume", str(tmp_path / "sweep")])
    assert parent.returncode == 2 and parent.stderr == (
        f"es-train: error: --resume {str(tmp_path / 'sweep')!r}: holds 2 run folders "
        "(CartPole-v1__cartpole__0, CartPole-v1__cartpole__1), not a run: resume one of them "
        f"(e.g. {str(tmp_path / 'sweep' / 'CartPole-v1__cartpole__0')!r}), or continue a "
        f"sweep's runs with its command, --resume-or-start {tmp_path / 'sweep'} in place of "
        "--run-dir\n")
    again = run_cli([*line, "--seeds", "0-2", "--set", "run.generations=3"], ranks=2)
    assert again.returncode == 0, again.stderr
    plain = run_cli(["es-train", *CARTPOLE, "--seeds", "0-2", "--set", "run.generations=3",
                     "--run-dir", str(tmp_path / "plain")])
    assert plain.returncode == 0, plain.stderr
    for seed in range(3):
        run = f"CartPole-v1__cartpole__{seed}"
        assert [int(r["generation"]) for r in read_progress(tmp_path / "sweep" / run)] == [1, 2, 3]
        assert np.array_equal(load_params(tmp_path / "sweep" / run),
                              load_params(tmp_path / "plain" / run))
    other = run_cli([*line, "--seeds", "0-3", "--set", "run.generations=4", "--set",
                     "es.sigma=0.3"], ranks=2)
    assert other.returncode == 2
    said = "".join(line for line in other.stderr.splitlines(keepends=True)
                   if not line.startswith("es-train: removed "))  # MPICH segments left earlier
    assert said == (
        f"es-train: error: --resume-or-start "
        f"{str(tmp_path / 'sweep' / 'CartPole-v1__cartpole__0')!r}: the folder holds a run of "
        "another config: es.sigma is 0.1 there and 0.3 here; use another folder, or the config "
        "and --set that started it\n")
    assert len([f for f in (tmp_path / "sweep").iterdir() if f.is_dir()]) == 3  # none started


def test_a_folder_started_by_another_config_is_refused_naming_the_key(tmp_path):
    run_dir = tmp_path / "run"
    assert run_cli(["es-train", *CARTPOLE, "--set", "run.generations=1", "--resume-or-start",
                    str(run_dir)]).returncode == 0
    other = run_cli(["es-train", *CARTPOLE, "--set", "run.generations=1", "--set",
                     "es.sigma=0.3", "--resume-or-start", str(run_dir)])
    assert other.returncode == 2
    said = "".join(line for line in other.stderr.splitlines(keepends=True)
                   if not line.startswith("es-train: removed "))  # MPICH segments left earlier
    assert said == (
        f"es-train: error: --resume-or-start {str(run_dir)!r}: the folder holds a run of "
        "another config: es.sigma is 0.1 there and 0.3 here; use another folder, or the "
        "config and --set that started it\n")
    assert len(read_progress(run_dir)) == 1  # untouched


def test_a_folder_with_only_a_config_starts_over_and_unrelated_files_stay(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "slurm-7.out").write_text("the job's own output\n")
    started = run_cli(["es-train", *CARTPOLE, "--set", "run.generations=2",
                       "--resume-or-start", str(run_dir)])
    assert started.returncode == 0, started.stderr
    assert (run_dir / "slurm-7.out").read_text() == "the job's own output\n"


@pytest.mark.parametrize(("extra", "message"), [
    (["--run-dir", "x"], "--resume-or-start RUN_DIR takes a config file and names the "
                         "folder itself"),
    (["--requeue-on-signal"], "--requeue-on-signal requeues a Slurm job, and this is not one"),
    (["--seeds", "0,1", "--run-dir", "x"], "--resume-or-start RUN_DIR takes a config file and "
                                           "names the folder itself"),
])
def test_flags_that_do_not_go_together_are_one_line_errors(tmp_path, extra, message):
    done = run_cli(["es-train", *CARTPOLE, "--resume-or-start", str(tmp_path / "r"), *extra])
    assert done.returncode == 2 and done.stderr.startswith(f"es-train: error: {message}")
    assert done.stderr.count("\n") == 1


def test_a_sweeps_folder_and_a_runs_folder_are_not_taken_for_each_other(tmp_path):
    """Without --seeds, the line started a run beside a sweep's runs (es-plot then refused
    the folder); with them, a sweep's runs went inside a run's folder. Both are refused, the
    folders left as they were."""
    sweep, single = tmp_path / "sweep", tmp_path / "single"
    assert run_cli(["es-train", *CARTPOLE, "--seeds", "0,1", "--set", "run.generations=1",
                    "--resume-or-start", str(sweep)]).returncode == 0
    assert run_cli(["es-train", *CARTPOLE, "--set", "run.generations=1", "--resume-or-start",
                    str(single)]).returncode == 0
    before = {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")}
    alone = run_cli(["es-train", *CARTPOLE, "--resume-or-start", str(sweep)])
    assert alone.returncode == 2 and alone.stderr == (
        f"es-train: error: --resume-or-start {str(sweep)!r} holds a sweep's runs "
        "(CartPole-v1__cartpole__0, CartPole-v1__cartpole__1), not a run: give the sweep's "
        "--seeds (and config files) as it was started, or another folder\n")
    swept = run_cli(["es-train", *CARTPOLE, "--seeds", "0,1", "--resume-or-start", str(single)])
    assert swept.returncode == 2 and swept.stderr == (
        f"es-train: error: --resume-or-start {str(single)!r} holds one run, not a sweep's: "
        "resume it without --seeds (and with its one config file), or give the sweep another "
        "folder\n")
    assert {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")} == before


def test_a_requeue_needs_a_line_that_resumes(tmp_path):
    done = run_cli(["es-train", *CARTPOLE, "--run-dir", str(tmp_path / "r"),
                    "--requeue-on-signal"], extra_env={"SLURM_JOB_ID": "7"})
    assert done.returncode == 2 and done.stderr == (
        "es-train: error: --requeue-on-signal needs --resume-or-start RUN_DIR: the requeued "
        "job runs the same command again, which must resume the run\n")
    assert not (tmp_path / "r").exists()


def test_copies_are_told_from_a_one_process_job(monkeypatch):
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"):
        monkeypatch.delenv(name, raising=False)
    assert comm_module.launcher_copies() == 0  # no launcher
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "1")
    assert comm_module.launcher_copies() == 0  # srun -n 1
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "4")
    assert comm_module.launcher_copies() == 4  # srun -n 4 without a PMI the MPI speaks
    monkeypatch.setenv("PMI_SIZE", "1")
    assert comm_module.launcher_copies() == 0  # Hydra's mpiexec -n 1 inside an allocation
    monkeypatch.setenv("PMI_SIZE", "3")
    assert comm_module.launcher_copies() == 3  # Hydra's mpiexec -n 3, another MPI's program
    monkeypatch.delenv("PMI_SIZE")
    monkeypatch.delenv("SLURM_STEP_NUM_TASKS")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert comm_module.launcher_copies() == 2  # Open MPI's mpirun -n 2, an MPICH program


def test_another_mpis_mpiexec_is_one_line_before_anything_is_written(tmp_path):
    """Open MPI's mpirun starting this installation's MPICH program (a cluster's module
    loaded before the venv's mpiexec): every process is its own one-rank job. Said once, by
    the launcher's process 0, before a copy writes the run folder."""
    launched = {"OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_RANK": "0"}
    done = run_cli(["es-train", *CARTPOLE, "--run-dir", str(tmp_path / "r")], extra_env=launched)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("es-train: error: the launcher started 3 processes, but each "
                                  "one's MPI (MPICH")
    assert "the mpiexec is another MPI's" in done.stderr and not (tmp_path / "r").exists()
    quiet = run_cli(["es-train", *CARTPOLE, "--run-dir", str(tmp_path / "r")],
                    extra_env={**launched, "OMPI_COMM_WORLD_RANK": "1"})
    assert (quiet.returncode, quiet.stderr) == (2, "")
    in_allocation = run_cli(["es-train", *CARTPOLE, "--run-dir", str(tmp_path / "r")],
                            extra_env={**launched, "SLURM_STEP_NUM_TASKS": "1"})
    assert "the launcher started 3 processes" in in_allocation.stderr  # mpirun's, not srun's


def test_a_lone_copy_refuses_before_it_writes_anything(tmp_path):
    done = run_cli(["es-train", *CARTPOLE, "--run-dir", str(tmp_path / "r")],
                   extra_env={"SLURM_STEP_NUM_TASKS": "3", "SLURM_PROCID": "0"})
    assert done.returncode == 2
    assert done.stderr.startswith("es-train: error: srun started 3 separate one-rank copies")
    assert done.stderr.count("\n") == 1 and not (tmp_path / "r").exists()
    quiet = run_cli(["es-train", *CARTPOLE, "--run-dir", str(tmp_path / "r")],
                    extra_env={"SLURM_STEP_NUM_TASKS": "3", "SLURM_PROCID": "2"})
    assert (quiet.returncode, quiet.stderr) == (2, "")  # one copy says it, not all three


def test_es_comm_is_mpi_local_or_unset(tmp_path):
    """A typo (``ES_COMM=bogus``) ran alone without a word; ``ES_COMM=local`` under a
    launcher of three was blamed on the launcher's MPI, not on the variable."""
    bogus = run_cli(["es-train", *CARTPOLE, "--run-dir", str(tmp_path / "r")],
                    extra_env={"ES_COMM": "bogus"})
    assert (bogus.returncode, bogus.stderr) == (2, "es-train: error: ES_COMM='bogus': allowed "
                                                "are 'mpi' and 'local', or leave it unset to "
                                                "follow the launcher\n")
    local = run_cli(["es-train", *CARTPOLE, "--run-dir", str(tmp_path / "r")],
                    extra_env={"ES_COMM": "local", "PMI_SIZE": "3", "PMI_RANK": "0"})
    assert (local.returncode, local.stderr) == (2, "es-train: error: ES_COMM=local: the "
                                                "launcher started 3 processes, and each would "
                                                "train alone; unset ES_COMM to run them as one "
                                                "job\n")
    assert not (tmp_path / "r").exists()
