"""Checkpoint/resume, signals, a killed rank, failing environments, bad checkpoints — through
the real CLI and real mpiexec."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, load_params, read_progress, run_cli, tool

from es.rl.checkpoint import load_latest_checkpoint
from es.rl.trainer import StopFlag

PENDULUM = ["configs/pendulum.toml", "--set", "es.population=10", "--set", "run.eval_every=2",
            "--set", "run.checkpoint_every=2", "--quiet"]
STABLE_COLUMNS = ("generation", "timesteps", "return_mean", "return_min", "return_max",
                  "episodes", "failed_episodes")


def stable(rows):
    return [{k: r[k] for k in STABLE_COLUMNS} for r in rows]


def test_resume_is_exact_also_on_another_rank_count(tmp_path):
    whole, split = tmp_path / "whole", tmp_path / "split"
    done = run_cli(["es-train", *PENDULUM, "--set", "run.generations=6", "--run-dir", str(whole)],
                   ranks=2)
    assert done.returncode == 0, done.stderr
    first = run_cli(["es-train", *PENDULUM, "--set", "run.generations=3", "--run-dir",
                     str(split)], ranks=2)
    assert first.returncode == 0, first.stderr
    resumed = run_cli(["es-train", "--resume", str(split), "--set", "run.generations=6",
                       "--quiet"], ranks=3)
    assert resumed.returncode == 0, resumed.stderr
    assert np.array_equal(load_params(split), load_params(whole))
    state, _, _ = load_latest_checkpoint(split / "checkpoints")
    assert state.generation == 6
    split_rows, whole_rows = read_progress(split), read_progress(whole)
    assert stable(split_rows) == stable(whole_rows)
    # The first session also evaluated its last generation (3); other evaluations agree.
    for a, b in zip(split_rows, whole_rows, strict=True):
        assert a["eval_return"] == b["eval_return"] or a["generation"] == "3"
    assert "generations = 6" in (split / "config.toml").read_text()


def test_checkpoints_are_npz_and_json_and_only_the_last_k_are_kept(tmp_path):
    run_dir = tmp_path / "k"
    done = run_cli(["es-train", *PENDULUM, "--set", "run.generations=7", "--set",
                    "run.checkpoint_every=1", "--set", "run.keep_checkpoints=2", "--run-dir",
                    str(run_dir)])
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert names == ["ckpt-00000006.json", "ckpt-00000006.npz", "ckpt-00000007.json",
                     "ckpt-00000007.npz"]
    meta = json.loads((run_dir / "checkpoints/ckpt-00000007.json").read_text())
    assert meta["generation"] == 7 and meta["config"]["es"]["population"] == 10
    with np.load(run_dir / "checkpoints/ckpt-00000007.npz", allow_pickle=False) as data:
        assert {"theta", "obs_sum", "obs_sumsq", "optimizer_m", "optimizer_v"} <= set(data.files)
        assert np.array_equal(data["theta"], load_params(run_dir))


def test_resume_refuses_other_overrides_and_bad_folders(tmp_path):
    run_dir = tmp_path / "r"
    assert run_cli(["es-train", *PENDULUM, "--set", "run.generations=2", "--run-dir",
                    str(run_dir)]).returncode == 0
    refused = run_cli(["es-train", "--resume", str(run_dir), "--set", "es.sigma=0.5"])
    assert refused.returncode == 2 and "only run.generations, run.max_timesteps" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    missing = run_cli(["es-train", "--resume", str(tmp_path / "nope")])
    assert missing.returncode == 2 and "no such run folder" in missing.stderr


def test_resume_warns_that_a_hand_edit_of_config_toml_is_not_what_it_trains_with(tmp_path):
    """The checkpoint's config wins and is written back: the edit vanished without a word.
    Budgets that --set moves between sittings are no edit."""
    run_dir = tmp_path / "r"
    assert run_cli(["es-train", *PENDULUM, "--set", "run.generations=2", "--run-dir",
                    str(run_dir)]).returncode == 0
    quiet = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=3"])
    assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr
    config = run_dir / "config.toml"
    sigma = tomllib.loads(config.read_text())["es"]["sigma"]
    config.write_text(config.read_text().replace(f"sigma = {sigma}\n", "sigma = 0.7\n", 1))
    warned = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=4"])
    assert warned.returncode == 0, warned.stderr
    assert (f"es-train: warning: {config} was edited: es.sigma = 0.7 (the checkpoint's: "
            f"{sigma}); a resumed run trains with its checkpoint's config") in warned.stderr
    assert tomllib.loads(config.read_text())["es"]["sigma"] == sigma


@pytest.mark.parametrize(("tampered", "edit"), [
    ("npz", "a flipped byte"),
    # Only the npz was hashed: a JSON still valid after an edit resumed without a word, with
    # other steps and progress rows.
    ("json", {"generation": 3}), ("json", {"timesteps": 1})])
def test_a_tampered_checkpoint_falls_back_to_the_previous_one(tmp_path, tampered, edit):
    run_dir = tmp_path / "t"
    assert run_cli(["es-train", *PENDULUM, "--set", "run.generations=4", "--run-dir",
                    str(run_dir)]).returncode == 0
    newest = run_dir / f"checkpoints/ckpt-00000004.{tampered}"
    if tampered == "npz":
        data = bytearray(newest.read_bytes())
        data[len(data) // 2] ^= 0xFF
        newest.write_bytes(bytes(data))
    else:
        newest.write_text(json.dumps(json.loads(newest.read_text()) | edit))
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=5",
                       "--quiet"])
    assert resumed.returncode == 0, resumed.stderr
    assert f"warning: skipping bad checkpoint ckpt-00000004.{tampered}: checksum mismatch" \
        in resumed.stderr
    assert [int(r["generation"]) for r in read_progress(run_dir)] == [1, 2, 3, 4, 5]
    # Every checkpoint bad: a one-line error, exit code 2.
    for path in (run_dir / "checkpoints").glob("*.npz"):
        path.write_bytes(path.read_bytes()[:100])
    broken = run_cli(["es-train", "--resume", str(run_dir)])
    assert broken.returncode == 2 and "no intact checkpoint" in broken.stderr
    assert len(broken.stderr.strip().splitlines()) == 1


def test_a_resume_removes_the_writes_a_killed_session_left_unfinished(tmp_path):
    """kill -9 during an atomic write leaves its temp file: a policy's worth each, never
    removed, not even by --force (it keeps what it does not know)."""
    run_dir = tmp_path / "k"
    assert run_cli(["es-train", *PENDULUM, "--set", "run.generations=2", "--run-dir",
                    str(run_dir)]).returncode == 0
    left = [run_dir / ".policy.npz.wrsq0c3c", run_dir / "checkpoints/.ckpt-00000003.npz.x1y2"]
    mine = run_dir / ".notes"  # a user's own file
    for path in [*left, mine]:
        path.write_bytes(b"partial")
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=3",
                       "--quiet"])
    assert resumed.returncode == 0, resumed.stderr
    assert not any(path.exists() for path in left) and mine.read_bytes() == b"partial"


def test_a_damaged_progress_file_is_named_and_kept_not_lost_in_silence(tmp_path):
    """A resume dropped the rows it could not read without a word (bytes not UTF-8 were a
    traceback naming no file), and es-plot named no file either."""
    run_dir = tmp_path / "p"
    assert run_cli(["es-train", *PENDULUM, "--set", "run.generations=4", "--set",
                    "run.checkpoint_every=1", "--run-dir", str(run_dir)]).returncode == 0
    progress = run_dir / "progress.csv"
    progress.write_text(progress.read_text().replace("\n3,", "\nx3,"))
    damaged = progress.read_text()
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=5",
                       "--quiet"])
    assert resumed.returncode == 0, resumed.stderr
    assert (f"{progress}: the rows of 1 generation (3) could not be read and are not in it "
            "from now on; the file as it was is kept as progress.csv.damaged") in resumed.stderr
    assert (run_dir / "progress.csv.damaged").read_text() == damaged
    assert [int(r["generation"]) for r in read_progress(run_dir)] == [1, 2, 4, 5]
    progress.write_bytes(b"generation\x00\xff\n")
    plotted = run_cli(["es-plot", str(run_dir), "-o", str(tmp_path / "p.png")])
    assert plotted.returncode == 2 and plotted.stderr.startswith(
        f"es-plot: error: {progress}: not readable ('utf-8' codec"), plotted.stderr


def start(args, ranks=None):
    command = [tool("es-train"), *args]
    if ranks:
        command = [tool("mpiexec"), "-n", str(ranks), *command]
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "PMI_SIZE", "ES_COMM")}
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_rows(run_dir: Path, rows: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        path = run_dir / "progress.csv"
        if path.exists() and len(path.read_text().splitlines()) > rows:
            return
        time.sleep(0.1)
    pytest.fail(f"no {rows} progress rows in {run_dir} after {timeout} s")


def rank_pids(run_dir: Path) -> list[int]:
    """Pids of the es-train Python processes (the ranks) of one run."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry.name.isdigit() and len(argv) > 1 and argv[1].endswith(b"es-train") \
                and str(run_dir).encode() in argv:
            pids.append(int(entry.name))
    return sorted(pids)


LONG = ["configs/pendulum.toml", "--set", "run.generations=100000", "--set",
        "run.checkpoint_every=1000", "--quiet"]


def paced(seconds: float, ranks: int = 1) -> list[str]:
    """A run whose generations take about ``seconds`` of wall time on ``ranks`` and almost no
    CPU (es/Sleep-v0: 16 members of 100 sleeping steps), checkpointed at each: a signal can be
    timed into a generation without two busy ranks slowing the tests beside it. Evaluated only
    at the end, on one episode, and no kept policy to confirm: a resume's last generation
    costs no more than the others."""
    step_ms = 1000 * seconds * ranks / (16 * 100)
    return ["configs/cartpole.toml", "--set", "env.id=es/Sleep-v0", "--set",
            f"env.kwargs.step_ms={step_ms:g}", "--set", "run.generations=100000", "--set",
            "run.eval_every=1000", "--set", "run.eval_episodes=1", "--set", "run.best_episodes=0",
            "--set", "run.checkpoint_every=1", "--quiet"]


@pytest.mark.parametrize(("signum", "code", "ranks"),
                         [(signal.SIGTERM, 75, 2), (signal.SIGUSR1, 75, None),
                          (signal.SIGUSR2, 75, 2), (signal.SIGINT, 130, None)])
def test_a_signal_on_one_rank_checkpoints_and_exits_with_its_documented_code(
        tmp_path, signum, code, ranks):
    """Ctrl-C: 130, as shells expect. SIGTERM and the SIGUSR1/2 that schedulers send ahead of
    a time limit: 75, which a batch script tells from a rank killed before it saved (143)."""
    run_dir = tmp_path / "s"
    process = start([*LONG, "--run-dir", str(run_dir)], ranks)
    wait_for_rows(run_dir, 2)
    pids = rank_pids(run_dir)
    assert len(pids) == (ranks or 1)
    os.kill(pids[-1], signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    assert f"checkpoint saved (exit code {code}). Resume with: es-train --resume" in stderr
    if ranks is None:  # rank 0 got it: said at once, where the stop came a generation later
        assert (f"es-train: {signal.Signals(signum).name}: stopping after the generation in "
                "progress, with its checkpoint") in stderr
    state, _, _ = load_latest_checkpoint(run_dir / "checkpoints")
    rows = read_progress(run_dir)
    assert state.generation == int(rows[-1]["generation"]) >= 2
    # policy.npz is the mean the run stopped at, though the last evaluation came earlier.
    with np.load(run_dir / "policy.npz") as policy:
        assert int(policy["generation"]) == state.generation
        assert np.array_equal(policy["params"], state.strategy["theta"].astype(np.float32))
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set",
                       f"run.generations={state.generation + 1}", "--quiet"])
    assert resumed.returncode == 0, resumed.stderr
    generations = [int(r["generation"]) for r in read_progress(run_dir)]
    assert generations == list(range(1, state.generation + 2))


def test_a_stop_signal_es_train_was_started_ignoring_stays_ignored(tmp_path):
    """A script's background job (``es-train ... &``) starts with SIGINT ignored, so that a
    Ctrl-C at the terminal is not for it: es-train took it over, and the Ctrl-C stopped the
    run. SIGTERM, not ignored, still stops it with its checkpoint."""
    run_dir = tmp_path / "background"
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "PMI_SIZE", "ES_COMM")}
    process = subprocess.Popen(
        [tool("es-train"), *paced(0.2), "--run-dir", str(run_dir)], cwd=REPO, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    wait_for_rows(run_dir, 1)
    process.send_signal(signal.SIGINT)
    rows = len(read_progress(run_dir))
    wait_for_rows(run_dir, rows + 3)  # three more generations: still training
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 75, stderr
    assert "SIGINT" not in stderr and "SIGTERM" in stderr


def test_a_signal_that_reaches_the_ranks_twice_is_one_stop_with_its_checkpoint(tmp_path):
    """scancel or a terminal's Ctrl-C signals the launcher and every rank, and Hydra forwards
    its copy to the ranks: each rank sees the signal twice, which is one request to stop
    (75, checkpointed), not the second one that stops at once (130, no checkpoint)."""
    run_dir = tmp_path / "twice"
    # Generations of about a second: the second copy lands before the stop, as scancel's do.
    process = start([*paced(1.0, ranks=2), "--run-dir", str(run_dir)], ranks=2)
    wait_for_rows(run_dir, 2)
    pids = rank_pids(run_dir)
    os.kill(process.pid, signal.SIGTERM)  # mpiexec: Hydra forwards it to both ranks
    time.sleep(0.2)  # the forwarded copy handled before the batch system's own arrives
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 75, stderr
    assert "checkpoint saved (exit code 75)" in stderr
    state, _, _ = load_latest_checkpoint(run_dir / "checkpoints")
    assert state.generation == int(read_progress(run_dir)[-1]["generation"])


def test_a_second_signal_stops_at_once_and_names_the_checkpoint_to_resume_from(tmp_path):
    """The user asking again stops mid-generation (130): it said only 'interrupted', though
    the run's newest checkpoint was intact and resumable."""
    run_dir = tmp_path / "again"
    # Generations of 4 s: the second signal lands inside the one after the first.
    process = start([*paced(4.0), "--run-dir", str(run_dir)])
    wait_for_rows(run_dir, 1)
    process.send_signal(signal.SIGTERM)
    time.sleep(StopFlag.REPEAT_WINDOW_S + 0.5)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert (f"es-train: interrupted on rank 0; the newest checkpoint is intact: resume with: "
            f"es-train --resume {run_dir}") in stderr
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=2",
                       "--quiet"])
    assert resumed.returncode == 0, resumed.stderr


@pytest.mark.parametrize(("schedule", "signalled"), [("dynamic", "both"), ("static", "rank 1")])
def test_a_second_signal_on_some_ranks_stops_every_rank_at_once(tmp_path, schedule, signalled):
    """Signalled twice while handing out units, rank 0 waited for the last requests of ranks
    that had stopped; a rank signalled twice alone stopped, and the others waited for it in
    the next exchange. Either way the job hung until the heartbeat's deadline and ended
    with exit 76, blaming the rank that was asked to stop."""
    run_dir = tmp_path / "again"
    process = start([*paced(7.0, ranks=2), "--set", f"run.schedule={schedule}", "--set",
                     "run.peer_timeout_s=600", "--run-dir", str(run_dir)], ranks=2)
    try:
        wait_for_rows(run_dir, 1)
        ranks = rank_pids(run_dir)
        for _ in range(2):
            for pid in ranks if signalled == "both" else ranks[1:]:
                os.kill(pid, signal.SIGTERM)
            time.sleep(StopFlag.REPEAT_WINDOW_S + 0.5)
        _, stderr = process.communicate(timeout=120)  # not the heartbeat's 600 s
    finally:  # a job that hangs must not outlive the test
        for pid in [*rank_pids(run_dir), process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    # Generations of 7 s: both rounds of signals land inside the one after the first.
    assert process.returncode == 130, stderr
    assert "interrupted on rank" in stderr and "peer lost" not in stderr


def test_a_second_signal_stops_at_once_only_after_the_repeat_window():
    """Copies of the first signal within ``REPEAT_WINDOW_S`` are ignored; a signal after it
    is the user asking again, which stops at once."""
    now = [100.0]
    flag = StopFlag(clock=lambda: now[0])
    flag._handle(signal.SIGTERM, None)
    now[0] += StopFlag.REPEAT_WINDOW_S / 2
    flag._handle(signal.SIGINT, None)  # a copy: the first signal's meaning stays
    assert flag.signum == signal.SIGTERM
    now[0] += StopFlag.REPEAT_WINDOW_S
    with pytest.raises(KeyboardInterrupt):
        flag._handle(signal.SIGINT, None)


def test_a_signal_held_at_start_up_is_announced_as_the_first(capfd):
    """A Ctrl-C in a run's first fifth of a second (held until the flag was installed)
    stopped the run after its first generation with no word that it would."""
    flag = StopFlag(clock=lambda: 5.0, announce="es-train: {signal}: stopping")
    flag.received_before(signal.SIGINT)
    assert (flag.signum, flag.first_at) == (signal.SIGINT, 5.0)
    assert capfd.readouterr().err == "es-train: SIGINT: stopping\n"


def test_a_killed_rank_ends_the_job_promptly_and_the_checkpoint_survives(tmp_path):
    run_dir = tmp_path / "dead"
    process = start([*LONG[:-3], "--set", "run.checkpoint_every=1", "--quiet", "--run-dir",
                     str(run_dir)], ranks=3)
    wait_for_rows(run_dir, 3)
    pids = rank_pids(run_dir)
    assert len(pids) == 3
    killed_at = time.time()
    os.kill(pids[1], signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=30)
    assert time.time() - killed_at < 10
    assert process.returncode != 0
    assert f"pid {pids[1]}@" in stderr  # the start-up line maps the launcher's pid to a rank
    assert str(pids[1]) in stdout + stderr  # the launcher names the dead process
    state, _, _ = load_latest_checkpoint(run_dir / "checkpoints")
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set",
                       f"run.generations={state.generation + 1}", "--quiet"], ranks=2)
    assert resumed.returncode == 0, resumed.stderr


FLAKY = ["fault_envs:Flaky-v0", "--set", "policy.kind=linear", "--set", "es.population=20",
         "--set", "run.generations=4", "--quiet"]


def test_failing_episodes_get_the_worst_fitness_and_are_counted(tmp_path):
    env = {"PYTHONPATH": str(REPO / "tests")}
    runs = {}
    for ranks in (None, 2):
        run_dir = tmp_path / f"flaky{ranks}"
        done = run_cli(["es-train", "configs/pendulum.toml", "--set", "env.id=" + FLAKY[0],
                        *FLAKY[1:], "--set", "run.max_failed_fraction=0.5", "--run-dir",
                        str(run_dir)], ranks=ranks, extra_env=env)
        assert done.returncode == 0, done.stderr
        runs[ranks] = run_dir
    failed = [int(r["failed_episodes"]) for r in read_progress(runs[None])]
    assert sum(failed) > 0 and all(f <= 10 for f in failed)
    assert np.array_equal(load_params(runs[None]), load_params(runs[2]))

    strict = run_cli(["es-train", "configs/pendulum.toml", "--set", "env.id=" + FLAKY[0],
                      *FLAKY[1:], "--set", "run.max_failed_fraction=0.0", "--run-dir",
                      str(tmp_path / "strict")], extra_env=env)
    assert strict.returncode == 1
    assert "episodes failed (more than run.max_failed_fraction = 0.0)" in strict.stderr
    # It stopped without policy.npz (es-eval had nothing to play), and a resume could not
    # raise the tolerance: it failed again on the same episodes.
    assert (tmp_path / "strict" / "policy.npz").is_file()
    resumed = run_cli(["es-train", "--resume", str(tmp_path / "strict"), "--set",
                       "run.max_failed_fraction=0.5"], extra_env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert np.array_equal(load_params(tmp_path / "strict"), load_params(runs[None]))


class SplitBrainComm:
    """A LocalComm whose gathers also return a second rank holding other parameters."""

    def __init__(self, inner):
        self.inner, self.rank, self.size = inner, 0, 2

    def allgather_rows(self, rows, counts=None):
        other = rows.copy()
        other[:, 0] = 1
        if other[0, 2]:
            other[:, 2] += 1  # a different parameter checksum
        return np.concatenate([self.inner.allgather_rows(rows, counts), other])

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_ranks_with_different_parameters_stop_with_a_clear_error(tmp_path):
    from es.config import from_dict
    from es.parallel.comm import LocalComm
    from es.rl.trainer import Trainer, TrainingError

    config = from_dict({"run": {"generations": 5, "check_every": 2, "eval_every": 100},
                        "es": {"population": 4, "noise_table_size": 10_000}})
    local = LocalComm()
    trainer = Trainer(config, local, tmp_path)
    split = SplitBrainComm(local)
    trainer._generation()
    trainer.comm = split
    assert trainer._agree() == 0  # generation 1: no check due
    trainer.comm = local
    trainer._generation()
    trainer.comm = split
    with pytest.raises(TrainingError, match=r"generation 2: parameters differ between ranks "
                                            r"\(ranks \[1\] disagree with rank 0\)"):
        trainer._agree()


def test_resume_drops_a_progress_row_cut_short_by_a_kill(tmp_path):
    run_dir = tmp_path / "cut"
    assert run_cli(["es-train", *PENDULUM, "--set", "run.generations=4", "--run-dir",
                    str(run_dir)]).returncode == 0
    progress = run_dir / "progress.csv"
    progress.write_text(progress.read_text() + "5,10000,3.1")  # a row the kill cut short
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=5",
                       "--quiet"])
    assert resumed.returncode == 0, resumed.stderr
    rows = read_progress(run_dir)
    assert [int(r["generation"]) for r in rows] == [1, 2, 3, 4, 5]
    assert rows[-1]["steps_per_s"]


def test_the_run_folder_holds_its_config_before_training_starts(tmp_path):
    from es.config import load_config
    from es.rl.runs import check_run_dir, start_run_dir

    config = load_config("configs/pendulum.toml", ["run.generations=7"])
    run_dir, error = check_run_dir(str(tmp_path / "early"), config, force=False)
    assert error is None and not Path(run_dir).exists()  # checked, not yet written
    assert start_run_dir(run_dir, config) is None
    assert load_config(Path(run_dir) / "config.toml") == config


def test_resume_of_a_run_killed_before_its_first_checkpoint_starts_it_over(tmp_path):
    run_dir, whole = tmp_path / "early", tmp_path / "whole"
    process = start([*LONG, "--set", "run.eval_every=1", "--run-dir", str(run_dir)])
    wait_for_rows(run_dir, 2)
    os.kill(rank_pids(run_dir)[0], signal.SIGKILL)
    process.communicate(timeout=30)
    assert not (run_dir / "checkpoints").exists() and (run_dir / "policy.npz").exists()
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=3",
                       "--quiet"], ranks=2)
    assert resumed.returncode == 0, resumed.stderr
    assert "no checkpoint written yet" in resumed.stderr
    assert "starting over from generation 0" in resumed.stderr
    done = run_cli(["es-train", *LONG, "--set", "run.eval_every=1", "--set",
                    "run.generations=3", "--run-dir", str(whole)])
    assert done.returncode == 0, done.stderr
    assert np.array_equal(load_params(run_dir), load_params(whole))
    assert stable(read_progress(run_dir)) == stable(read_progress(whole))
    assert "generations = 3" in (run_dir / "config.toml").read_text()


def test_resume_of_a_folder_without_checkpoint_or_config_says_to_start_again(tmp_path):
    (tmp_path / "bare").mkdir()
    refused = run_cli(["es-train", "--resume", str(tmp_path / "bare")])
    assert refused.returncode == 2
    assert "start it again with the original command" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_a_run_stopped_by_max_seconds_can_be_extended_on_resume(tmp_path):
    run_dir = tmp_path / "timed"
    done = run_cli(["es-train", *PENDULUM, "--set", "run.generations=100000", "--set",
                    "run.max_seconds=2", "--run-dir", str(run_dir)])
    assert done.returncode == 0, done.stderr
    state, _, _ = load_latest_checkpoint(run_dir / "checkpoints")
    assert 0 < state.generation < 100000
    # Resumed without more time: the budget is spent already, no generation is added.
    again = run_cli(["es-train", "--resume", str(run_dir), "--quiet"])
    assert again.returncode == 0, again.stderr
    assert int(read_progress(run_dir)[-1]["generation"]) == state.generation
    more = state.generation + 2
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.max_seconds=0",
                       "--set", f"run.generations={more}", "--quiet"])
    assert resumed.returncode == 0, resumed.stderr
    assert [int(r["generation"]) for r in read_progress(run_dir)] == list(range(1, more + 1))
    assert "max_seconds = 0.0" in (run_dir / "config.toml").read_text()


def test_time_a_run_stood_stopped_is_left_out_of_its_clock_and_budget(tmp_path):
    """SIGSTOP on every rank (a scheduler's suspend, a measurement beside the run): the
    stopped seconds go to ``paused_s``, not to ``time_s`` or ``run.max_seconds``, and a resume
    carries them on."""
    run_dir, stopped_s = tmp_path / "paused", 4.0
    process = start([*paced(0.5, ranks=2), "--set", "run.max_seconds=5", "--run-dir",
                     str(run_dir)], 2)
    wait_for_rows(run_dir, 2)
    pids = rank_pids(run_dir)
    assert len(pids) == 2
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(stopped_s)
    for pid in pids:
        os.kill(pid, signal.SIGCONT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    rows = read_progress(run_dir)
    paused = [float(row["paused_s"]) for row in rows]
    assert paused[0] == 0.0 and paused == sorted(paused)
    assert stopped_s - 1.0 <= paused[-1] <= stopped_s + 1.0
    # No row's clock jumps by the stop, and the budget bought 5 s of running time.
    times = [float(row["time_s"]) for row in rows]
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) < stopped_s - 1.5
    assert 5.0 <= times[-1] < 5.0 + stopped_s - 1.5
    state, _, _ = load_latest_checkpoint(run_dir / "checkpoints")
    assert state.paused_s == pytest.approx(paused[-1], rel=1e-5)
    more = state.generation + 2
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.max_seconds=0",
                       "--set", f"run.generations={more}", "--quiet"])
    assert resumed.returncode == 0, resumed.stderr
    assert [float(row["paused_s"]) for row in read_progress(run_dir)[-2:]] == [paused[-1]] * 2


def test_a_stop_signal_during_start_up_is_held_for_the_run_not_raised():
    """A Ctrl-C while the ranks exchanged their start-up raised KeyboardInterrupt on one rank
    and left the other waiting for ever; held, the run stops after its first generation."""
    from es.cli import train

    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        train.hold_early_signals()
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # handlers run between bytecodes: no KeyboardInterrupt on the way
        assert train.EARLY_SIGNALS == [signal.SIGINT, signal.SIGTERM]
    finally:
        train.EARLY_SIGNALS.clear()
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def test_a_full_disk_ends_the_run_in_one_line_that_says_how_to_resume(tmp_path):
    """The line named neither the folder nor the intact checkpoint and its resume command
    (which is quoted for a folder with a space in its name)."""
    full = tmp_path / "full"
    full.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=150k", "tmpfs",
                                            str(full)], capture_output=True).returncode != 0:
        pytest.skip("a full disk needs root, to mount a small tmpfs")
    try:
        run_dir = full / "my run"
        done = run_cli(["es-train", "configs/pendulum.toml", "--set", "run.generations=100",
                        "--set", "run.checkpoint_every=5", "--run-dir", str(run_dir), "--quiet"])
        assert done.returncode == 1, done.stderr
        (line,) = [line for line in done.stderr.splitlines() if "error" in line]
        assert line == ("es-train: error on rank 0: OSError: [Errno 28] No space left on device; "
                        f"the newest checkpoint is intact: once {run_dir} can be written again, "
                        f"resume with: es-train --resume '{run_dir}'"), line
        moved = tmp_path / "moved"
        shutil.copytree(run_dir, moved, ignore=shutil.ignore_patterns("es.lock"))
    finally:
        subprocess.run(["umount", str(full)], check=True)
    state, _, _ = load_latest_checkpoint(moved / "checkpoints")
    resumed = run_cli(["es-train", "--resume", str(moved), "--quiet", "--set",
                       f"run.generations={state.generation + 2}"])
    assert resumed.returncode == 0, resumed.stderr
    assert int(read_progress(moved)[-1]["generation"]) == state.generation + 2


def test_an_update_that_makes_the_parameters_nan_ends_the_run_keeping_no_nan_policy(tmp_path):
    """It went on, kept a NaN policy as policy_best.npz, exit 0; es-eval then scored it."""
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "es.lr=1e308", "--set",
                    "es.optimizer=sgd", "--set", "run.generations=4", "--run-dir", str(run_dir),
                    "--quiet"])
    assert done.returncode == 1, done.stderr
    assert ("es-train: error: generation 1: the update made the parameters NaN or inf, a step "
            "too long for them (es.lr); the newest checkpoint holds the last finite ones"
            ) in done.stderr
    for saved in run_dir.glob("**/*.npz"):
        with np.load(saved) as data:
            assert np.all(np.isfinite(data["params"])), saved
