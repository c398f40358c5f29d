"""Invariants under real mpiexec: bit-identical parameters at any rank count, scalars only,
one noise table per node, and waits that do not burn a core."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, load_params, read_progress, run_cli, tool

from es.rl.kept import CONFIRM_ROUND

CASES = {
    # Continuous actions, an MLP, observation normalisation, table noise, 5 directions (not
    # divisible by 2 or 3 ranks).
    "pendulum-table": ["configs/pendulum.toml", "--set", "es.population=10",
                       "--set", "run.generations=4", "--set", "run.eval_every=2"],
    # Discrete actions, an MLP, regenerated noise, no mirroring, 7 members.
    "cartpole-seed-mlp": ["configs/cartpole.toml", "--set", "es.population=7",
                          "--set", "es.mirrored=false", "--set", "es.noise=seed",
                          "--set", "policy.kind=mlp", "--set", "policy.hidden=[16]",
                          "--set", "run.generations=4"],
}


def initial_params(args: list[str]) -> np.ndarray:
    """The generation-0 parameters that the run with these arguments starts from."""
    from es.config import load_config
    from es.parallel.comm import LocalComm
    from es.rl.trainer import Trainer

    overrides = [value for flag, value in zip(args[1:], args[2:], strict=False) if flag == "--set"]
    config = load_config(REPO / args[0], overrides)
    return Trainer(config, LocalComm(), None).strategy.theta.copy()


@pytest.mark.parametrize("case", sorted(CASES))
def test_parameters_are_bit_identical_for_any_rank_count(tmp_path, case):
    results = {}
    for ranks in (None, 1, 2, 3):
        run_dir = tmp_path / f"n{ranks}"
        done = run_cli(["es-train", *CASES[case], "--run-dir", str(run_dir), "--quiet"],
                       ranks=ranks)
        assert done.returncode == 0, done.stderr
        results[ranks] = load_params(run_dir)
    plain = results.pop(None)
    initial = initial_params(CASES[case])
    assert plain.shape == initial.shape and np.isfinite(plain).all()
    assert not np.array_equal(plain, initial), "training left the parameters unchanged"
    for ranks, params in results.items():
        assert np.array_equal(params, plain), f"-n {ranks} differs from the plain run"


def test_bytes_per_generation_are_scalars_not_parameters(tmp_path):
    """With 3 ranks and ~9k MLP parameters, a generation sends far less than one vector;
    under the static schedule, exactly what the bound below counts (the dynamic schedule's
    extra bytes: test_dynamic_schedule_gives_the_static_schedules_parameters)."""
    run_dir = tmp_path / "bytes"
    population, ranks, obs_dim, eval_episodes = 12, 3, 3, 4
    done = run_cli(["es-train", "configs/pendulum.toml", "--run-dir", str(run_dir), "--quiet",
                    "--set", "run.schedule=static",
                    "--set", f"es.population={population}", "--set", "policy.kind=mlp",
                    "--set", "policy.hidden=[64, 128]", "--set", "run.generations=3",
                    "--set", "run.eval_every=1", "--set", f"run.eval_episodes={eval_episodes}",
                    "--set", "run.best_share=100"],
                   ranks=ranks)
    assert done.returncode == 0, done.stderr
    num_params = load_params(run_dir).size
    assert num_params > 8000
    # A float32 return per member, the block of step count and obs sums from each rank, the
    # extra episodes played beside the members (the previous generation's evaluation and a
    # round of confirmation: float64 returns, the round's step total and the rank's seconds
    # in either kind) from each rank in the all-reduce that gathers them, and one (rank,
    # stop signal, checksum, out of time, peak memory) row per rank.
    bound = (4 * population + ranks * 8 * (1 + 2 * obs_dim + 1)
             + ranks * 8 * (eval_episodes + CONFIRM_ROUND + 3) + ranks * 40)
    for row in read_progress(run_dir):
        sent = int(row["bytes_sent"])
        assert 0 < sent <= bound, (sent, bound)
        assert sent < 4 * num_params / 10


def test_time_budget_ends_every_rank_at_the_same_generation(tmp_path):
    """run.max_seconds: the ranks agree on when time is up (no rank left waiting), the last
    generation is evaluated and its policy saved."""
    run_dir = tmp_path / "budget"
    done = run_cli(["es-train", "configs/pendulum.toml", "--run-dir", str(run_dir), "--quiet",
                    "--set", "run.generations=100000", "--set", "run.max_seconds=4",
                    "--set", "run.eval_every=1000"], ranks=2, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = read_progress(run_dir)
    # Each rank counts from its own start, so rank 0's clock may read a little under 4 s.
    assert 3 <= float(rows[-1]["time_s"]) < 30
    assert rows[-1]["eval_return"] and len(rows) < 100000
    with np.load(run_dir / "policy.npz") as policy:
        assert int(policy["generation"]) == int(rows[-1]["generation"])


def test_shared_noise_table_is_one_copy_per_node_and_waits_are_idle():
    done = run_cli_script("shared_table.py", ranks=2)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok" in done.stdout


def run_cli_script(name: str, ranks: int):
    return subprocess.run(
        [tool("mpiexec"), "-n", str(ranks), sys.executable, str(REPO / "tests/mpi_scripts" / name)],
        capture_output=True, text=True, timeout=120,
    )


def test_dynamic_schedule_gives_the_static_schedules_parameters(tmp_path):
    """Work stealing changes who evaluates a member, never the result."""
    base = ["configs/cartpole.toml", "--set", "env.id=es/Sleep-v0", "--set",
            "env.kwargs.step_ms=0.1", "--set", "env.kwargs.lengths=pareto", "--set",
            "es.population=14", "--set", "run.generations=3", "--quiet"]
    params = {}
    for schedule, ranks in (("static", None), ("static", 3), ("dynamic", 3), ("dynamic", 2)):
        run_dir = tmp_path / f"{schedule}{ranks}"
        done = run_cli(["es-train", *base, "--set", f"run.schedule={schedule}", "--run-dir",
                        str(run_dir)], ranks=ranks)
        assert done.returncode == 0, done.stderr
        params[schedule, ranks] = load_params(run_dir)
        if schedule == "dynamic":
            # Each of the 14 members travels as an (id, return) float64 row instead of one
            # float32, plus a row count per rank, and the work queue's 16-byte request and
            # reply per member another rank takes after its first (rank r starts with
            # member r, and rank 0 takes its own without a message) and per other rank's
            # final "none left".
            static_bytes = int(read_progress(tmp_path / "static3")[0]["bytes_sent"])
            if ranks == 3:
                extra = int(read_progress(run_dir)[0]["bytes_sent"]) - static_bytes
                fixed = 14 * (16 - 4) + 8 * 3 + 16 * 2
                assert fixed <= extra <= fixed + 16 * 14
                assert (extra - fixed) % 16 == 0
    reference = params["static", None]
    for key, value in params.items():
        assert np.array_equal(value, reference), key


def test_dynamic_schedule_with_fewer_members_than_ranks(tmp_path):
    """Rank r starts with member r without asking; with fewer members than ranks nobody asks
    at all, and the rank without a member still gets every return (ARS on Swimmer: one
    mirrored pair)."""
    args = ["configs/cartpole.toml", "--set", "es.population=2", "--set",
            "run.generations=4", "--set", "run.schedule=dynamic", "--set",
            "run.eval_every=1000", "--quiet"]
    params = {}
    for ranks in (None, 3):
        done = run_cli(["es-train", *args, "--run-dir", str(tmp_path / f"n{ranks}")],
                       ranks=ranks)
        assert done.returncode == 0, done.stderr
        params[ranks] = load_params(tmp_path / f"n{ranks}")
    assert np.array_equal(params[3], params[None])


@pytest.mark.parametrize("ranks", [2, 3])
def test_small_exchanges_are_rank_ordered_and_never_wait_for_a_sleeping_rank(ranks):
    done = run_cli_script("exchanges.py", ranks=ranks)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok" in done.stdout


def test_dynamic_schedule_between_two_hostfile_hosts_ends_on_a_loaded_machine(tmp_path):
    """Two names of this machine in a hostfile make Hydra treat the ranks as two hosts, so
    MPICH talks over its default UCX netmod rather than shared memory. There the schedule's
    wildcard receive on rank 0 missed requests that had arrived: the run hung for good
    (2 of 2 runs of 150 CartPole generations beside two busy processes, 5 of 5 in a user's
    trial). With a receive per rank, it ends, with the parameters of one process. Episodes
    of at most 50 steps keep the requests as many and make them come faster: the old code
    hung 3 of 3 times so, the fixed one ends in seconds."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1:1\nlocalhost:1\n")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    args = ["configs/cartpole.toml", "--set", "run.generations=150", "--set",
            "env.max_episode_steps=50", "--set", "run.schedule=dynamic", "--quiet"]
    try:
        done = subprocess.run([tool("mpiexec"), "-f", str(hosts), "-n", "2", tool("es-train"),
                               *args, "--run-dir", str(tmp_path / "two")], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
    finally:
        for process in busy:
            process.kill()
    assert done.returncode == 0, done.stderr[-2000:]
    alone = run_cli(["es-train", *args, "--run-dir", str(tmp_path / "one")])
    assert alone.returncode == 0, alone.stderr
    assert np.array_equal(load_params(tmp_path / "two"), load_params(tmp_path / "one"))


def test_progress_records_the_largest_ranks_peak_memory(tmp_path):
    """peak_rss_mb: every rank's peak resident memory travels in the row the ranks already
    send each generation; the largest is logged (a high-water mark: never falling)."""
    run_dir = tmp_path / "rss"
    done = run_cli(["es-train", "configs/pendulum.toml", "--run-dir", str(run_dir), "--quiet",
                    "--set", "run.generations=3", "--set", "es.population=8"], ranks=2)
    assert done.returncode == 0, done.stderr
    peaks = [float(row["peak_rss_mb"]) for row in read_progress(run_dir)]
    assert 30 < peaks[0] < 4096 and peaks == sorted(peaks)


def test_evaluations_cost_the_ranks_mean_seconds_not_rank_zeros(tmp_path):
    """Three 0.1-s evaluation episodes beside the members on 2 ranks (static schedule: rank 0
    plays two, rank 1 one, and more members instead): rank 0's eval_s is two episodes, but
    the machine paid three, half each: eval_ranks_s is 1.5 episodes. The stop's evaluation
    ties up every rank: there it is the phase's wall time."""
    episode_s = 50 * 0.002
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "env.id=es/Sleep-v0",
                    "--set", "env.kwargs.step_ms=2", "--set", "env.kwargs.mean_length=50",
                    "--set", "es.population=4", "--set", "run.generations=3",
                    "--set", "run.eval_every=1", "--set", "run.eval_episodes=3",
                    "--set", "run.schedule=static", "--set", "run.best_episodes=0",
                    "--run-dir", str(run_dir), "--quiet"], ranks=2)
    assert done.returncode == 0, done.stderr
    *beside, last = read_progress(run_dir)
    for row in beside:
        mine, machine = float(row["eval_s"]), float(row["eval_ranks_s"])
        assert mine >= 2 * episode_s and 1.5 * episode_s <= machine < mine, row
    assert float(last["eval_ranks_s"]) >= max(float(last["eval_s"]), 2 * episode_s)


def test_ranks_given_different_arguments_all_raise_saying_which(tmp_path):
    """An unseeded random x0 under mpiexec gave each rank its own result (rank 1's ``fun``
    was not the value of its ``x``), another popsize hung, and an override that depends on
    the rank had es.train's ranks wait for each other for good."""
    done = subprocess.run([tool("mpiexec"), "-n", "2", sys.executable,
                           str(REPO / "tests/mpi_scripts/disagreeing_ranks.py"),
                           str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    said = {name: [line.split(" ", 2)[2] for line in lines if line.startswith(f"{name} ")]
            for name in ("x0", "popsize", "seed", "same", "train", "fun", "override", "run_dir",
                         "spelled", "resume")}
    minimize = "ValueError: es.minimize under mpiexec: the ranks were given different "
    assert said["x0"] == [minimize + "x0 (rank 1's differs from rank 0's); every rank must "
                          "call it with the same arguments (a random x0: draw it from a "
                          "seeded generator, np.random.default_rng(0))"] * 2
    assert said["popsize"] == [minimize + "popsize (rank 0: 8, rank 1: 10); every rank must "
                               "call it with the same arguments"] * 2
    assert said["seed"] == [minimize + "seed (rank 0: 0, rank 1: 1); every rank must call it "
                            "with the same arguments"] * 2
    assert said["same"][0] == said["same"][1] and said["same"][0].startswith("returned ")
    assert said["train"] == ["ConfigError: es.train under mpiexec: the ranks were given "
                             "different run.generations (rank 0: 4, rank 1: 44); every rank "
                             "must be given the same config, overrides, run_dir and force"] * 2
    # An argument that rank 1 alone refused: it raised alone, and rank 0 waited for good.
    assert said["fun"] == [
        "ValueError: es.minimize under mpiexec: rank 1 refused its arguments (TypeError: fun "
        "None: must be callable, the function to minimise); every rank must be given the same "
        "ones", "TypeError: fun None: must be callable, the function to minimise"]
    refused = said["override"][1]
    assert refused.startswith("ConfigError: run.generations") and "'many'" in refused, refused
    assert said["override"][0] == ("ConfigError: es.train under mpiexec: rank 1 refused its "
                                   f"arguments ({refused}); every rank must be given the same "
                                   "ones")
    # Rank 0 alone chooses the run folder: rank 1's was dropped unsaid.
    assert said["run_dir"] == ["ConfigError: es.train under mpiexec: the ranks were given "
                               "different run_dir (rank 1's differs from rank 0's); every "
                               "rank must be given the same config, overrides, run_dir and "
                               "force"] * 2
    # One folder spelled two ways (runs/x and runs/./x/) was refused as two.
    assert said["spelled"] == ["returned 2"] * 2
    # Rank 0 alone reads the run folder with its overrides: rank 1's were dropped unsaid.
    assert said["resume"] == ["ConfigError: es.resume under mpiexec: the ranks were given "
                              "different run.generations (rank 0: 10, rank 1: 11); every rank "
                              "must be given the same run_dir and overrides"] * 2
    # Refused before anything was written: only the agreed run's folder is there.
    assert [path.name for path in tmp_path.iterdir()] == ["run_spelled"]


@pytest.mark.parametrize("mode", ["minimize", "train", "alone"])
def test_a_call_that_another_rank_never_makes_says_so_while_it_waits(tmp_path, mode):
    """Rank 0 made one es call more than rank 1, which had ended, or made the only one
    (``if rank == 0: es.train(...)``): it waited in the call's first exchange for good,
    silent. It cannot know that the rank ended, so it waits on, but says what may be wrong
    (here after 1 s, by default 60 s)."""
    import signal
    import time

    job = subprocess.Popen([tool("mpiexec"), "-n", "2", sys.executable,
                            str(REPO / "tests/mpi_scripts/ranks_leave.py"), mode,
                            str(tmp_path / "run")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           cwd=REPO, start_new_session=True)
    said: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("at the start" in x for x in said):
            line = job.stderr.readline()
            if not line:
                break
            said.append(line.rstrip("\n"))
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate()
    assert ("es: rank 0 has waited 1 s for the other ranks at the start of an es call; a rank "
            "still loading (a slow shared file system) comes late, but one that ends without "
            "making the same es calls (a script's call under `if rank == 0:`) never comes: "
            "under mpiexec every rank must make them; still waiting") in said, said


@pytest.mark.parametrize("program", ["es-train", "es.minimize"])
def test_a_stop_signal_while_mpi_starts_ends_a_rank_its_peer_will_never_join(tmp_path,
                                                                             program):
    """A Ctrl-C ended one rank while it still loaded; the other, already in MPI_Init (which
    waits in C for every rank, where no Python handler runs), held the signal and waited
    there for good, burning a core, and Hydra with it. Here rank 1 is a process that never
    starts MPI at all, as that rank never did. A script's es.minimize alike."""
    import signal
    import time

    marker = str(tmp_path / "run")  # in rank 0's command line, to find its process
    rank0_command = {
        "es-train": [tool("es-train"), "configs/cartpole.toml", "--run-dir", marker],
        "es.minimize": [sys.executable, "-c", "import sys, es; es.minimize(es.functions.sphere, "
                        "[1.0], 0.5, max_evals=10); open(sys.argv[1], 'w')", marker],
    }[program]
    job = subprocess.Popen(
        [tool("mpiexec"), "-n", "1", *rank0_command, ":", "-n", "1", sys.executable, "-c",
         "pass"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        rank0 = None
        deadline = time.monotonic() + 60
        while rank0 is None and time.monotonic() < deadline:  # rank 0 inside MPI_Init
            for pid in subprocess.run(["pgrep", "-f", marker], text=True,
                                      capture_output=True).stdout.split():
                with contextlib.suppress(OSError):
                    process = Path(f"/proc/{pid}")
                    if "mpiexec" not in (process / "cmdline").read_text() \
                            and "libmpi" in (process / "maps").read_text():
                        rank0 = int(pid)
            time.sleep(0.1)
        assert rank0 is not None, f"{program} never loaded MPI"
        time.sleep(1.0)  # well inside MPI_Init, waiting for rank 1
        os.kill(rank0, signal.SIGINT)
        job.communicate(timeout=30)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
            pytest.fail("the rank waiting in MPI_Init outlived the stop signal")
    assert not Path(marker).exists()  # nothing ran


def test_a_stop_signal_held_before_mpi_starts_ends_the_rank_before_it():
    """Held (es-train's start-up), it took the rank into MPI_Init, to wait there for ranks
    that the same signal had ended while they loaded."""
    script = ("import signal, sys\n"
              "from es.cli import train\n"
              "train.EARLY_SIGNALS.append(signal.SIGTERM)\n"
              "try:\n"
              "    train.world_comm('es-train')\n"
              "except KeyboardInterrupt:\n"
              "    print('interrupted', 'mpi4py.MPI' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=REPO, env={**os.environ, "ES_COMM": "mpi"})
    assert done.stdout == "interrupted False\n", done.stderr
