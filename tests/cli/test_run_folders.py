"""A run folder holds one run, as a user trial found it did not: two configs of one name in a
sweep, a second es-train on a live folder, a resume that would start a trained run over, a
baseline that refused its config after writing the folder; a Ctrl-C stops a whole sweep or
comparison; output folders and names that cannot be written are refused before any work."""

import importlib.util
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, read_progress, run_cli, tool
from test_cli import one_line_error

from es.bench.compare import config_for
from es.cli.args import SpecError, output_folder
from es.rl.runs import LOCK_FILE, LOCK_HELD_BY_SUPERVISOR, claim_run_dir, release_run_dir

SHORT = ["--set", "run.generations=2", "--set", "es.population=8", "--quiet"]


def test_two_configs_of_one_name_in_a_sweep_are_refused_before_training(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "cp.toml").write_text((REPO / "configs/cartpole.toml").read_text())
    done = run_cli(["es-train", str(tmp_path / "a/cp.toml"), str(tmp_path / "b/cp.toml"),
                    "--run-dir", str(tmp_path / "runs"), *SHORT])
    one_line_error(done, "would train in the same folder",
                   str(tmp_path / "runs" / "CartPole-v1__cp__0"), "another run.name")
    assert not (tmp_path / "runs").exists()


def hold(folder, who="a test"):
    """A process that holds ``folder`` as a training rank 0 would, until killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from es.rl.runs import claim_run_dir; "
         f"assert claim_run_dir(sys.argv[1], {who!r}) is None; print('held', flush=True); "
         "time.sleep(600)", str(folder)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_folder_held_by_a_live_run_is_refused_and_free_once_it_ends(tmp_path):
    folder = tmp_path / "run"
    holder = hold(folder)
    try:
        error = claim_run_dir(folder)
        assert error == (f"run folder {str(folder)!r}: in use by a test pid {holder.pid} on "
                         f"{os.uname().nodename}; wait until it stops, or choose another folder")
        # An elastic supervisor holds it for the ranks it launches: they go on.
        os.environ[LOCK_HELD_BY_SUPERVISOR] = str(folder.resolve())
        try:
            assert claim_run_dir(folder) is None
        finally:
            del os.environ[LOCK_HELD_BY_SUPERVISOR]
    finally:
        holder.kill()
        holder.wait()
    assert claim_run_dir(folder) is None  # the lock went with its process
    release_run_dir(folder)
    assert (folder / LOCK_FILE).is_file()


def test_es_train_refuses_a_resume_or_a_forced_start_in_a_folder_in_use(tmp_path):
    folder = tmp_path / "run"
    done = run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(folder), *SHORT])
    assert done.returncode == 0, done.stderr
    rows = read_progress(folder)
    holder = hold(folder, "es-train")
    try:
        one_line_error(run_cli(["es-train", "--resume", str(folder), "--set",
                                "run.generations=4"]), "in use by es-train pid")
        one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(folder),
                                "--force", *SHORT]), "in use by es-train pid")
        # Without --force it said "continue it with es-train --resume", then refused that.
        one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(folder),
                                *SHORT]), "in use by es-train pid")
    finally:
        holder.kill()
        holder.wait()
    assert read_progress(folder) == rows  # neither wrote into it
    done = run_cli(["es-train", "--resume", str(folder), "--set", "run.generations=4"])
    assert done.returncode == 0, done.stderr
    assert len(read_progress(folder)) == 4


def test_resuming_a_trained_run_whose_checkpoints_are_gone_is_refused(tmp_path):
    folder = tmp_path / "run"
    assert run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(folder),
                    *SHORT]).returncode == 0
    policy = (folder / "policy.npz").read_bytes()
    for path in (folder / "checkpoints").iterdir():
        path.unlink()
    one_line_error(run_cli(["es-train", "--resume", str(folder)]),
                   "its checkpoints are gone but it holds a trained run (2 generations",
                   "--force")
    assert (folder / "policy.npz").read_bytes() == policy


@pytest.mark.parametrize("program", [["es-train", "configs/cartpole.toml"],
                                     ["es-baseline", "pg", "configs/baselines/cartpole_pg.toml"]])
def test_a_run_is_not_written_over_a_sweeps_runs_even_with_force(tmp_path, program):
    """Called "not empty (no run in it)", and with --force the run went in beside the sweep's
    runs, after which es-plot and es-eval took the folder for that run alone."""
    sweep = tmp_path / "sweep"
    done = run_cli(["es-train", "configs/cartpole.toml", "--seeds", "0-1", "--run-dir",
                    str(sweep), "--set", "run.generations=1", "--quiet"])
    assert done.returncode == 0, done.stderr
    refused = run_cli([*program, "--run-dir", str(sweep), "--force", "--set",
                       "run.generations=1"])
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith(
        f"run folder '{sweep}': holds 2 runs in its subfolders (CartPole-v1__cartpole__0, "
        "CartPole-v1__cartpole__1); a run written beside them would hide them: choose "
        "another folder"), refused.stderr
    assert not (sweep / "config.toml").exists()


def test_a_baseline_that_refuses_its_config_leaves_no_folder_behind(tmp_path):
    folder = tmp_path / "run"
    args = ["configs/pong.toml", "--set", "run.generations=1", "--run-dir", str(folder)]
    done = run_cli(["es-baseline", "ppo", *args])
    assert done.returncode == 2 and "policy.kind = 'cnn'" in done.stderr, done.stderr
    assert not folder.exists()
    done = run_cli(["es-baseline", "pg", *args])  # the next error, not "already holds"
    assert done.returncode == 2 and "policy.vbn = true" in done.stderr, done.stderr


@pytest.mark.parametrize("folder_flag", ["--run-dir", "--resume-or-start"])
def test_ctrl_c_stops_a_sweep_after_the_runs_it_stopped(tmp_path, folder_flag):
    line = [tool("es-train"), "configs/pendulum.toml", "--seeds", "0-2", folder_flag,
            str(tmp_path), "--quiet"]
    sweep = subprocess.Popen([*line, "--set", "run.generations=100000"], cwd=REPO,
                             stderr=subprocess.PIPE, text=True)
    first = tmp_path / "Pendulum-v1__pendulum__0"
    deadline = time.monotonic() + 120
    while not any((first / "checkpoints").glob("*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    sweep.send_signal(signal.SIGINT)
    _, stderr = sweep.communicate(timeout=120)
    assert sweep.returncode == 130, stderr
    # Every line of a sweep names its run; the runs not started get the line that starts them.
    assert "es-train: [pendulum seed 0] SIGINT: stopping after the generation in progress" \
        in stderr
    assert "es-train: [pendulum seed 0] stopped by SIGINT after generation " in stderr
    stopped = "es-train: [pendulum seed 0] stopped; not started: [pendulum seed 1], [pendulum " \
              "seed 2]; "
    assert sorted(path.name for path in tmp_path.iterdir()) == [first.name]
    if folder_flag == "--resume-or-start":  # one line continues the whole sweep
        assert f"{stopped}the same command resumes it and starts them\n" in stderr
        started = run_cli([*line, "--set", "run.generations=1"])
    else:
        rest = (f"es-train configs/pendulum.toml --seeds 1,2 --set run.generations=100000 "
                f"--run-dir {tmp_path}")
        assert f"{stopped}they start with: {rest}\n" in stderr
        started = run_cli([*rest.split()[:-2], "--set", "run.generations=1", "--quiet",
                           "--run-dir", str(tmp_path)])
    assert started.returncode == 0, started.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        first.name, "Pendulum-v1__pendulum__1", "Pendulum-v1__pendulum__2"]


def test_es_compare_trains_a_given_config_on_the_env_it_compares_on():
    assert config_for("es", "Acrobot-v1", True, {"es": "configs/cartpole.toml"}) == (
        "configs/cartpole.toml", ["env.id=Acrobot-v1"])
    one_line_error(run_cli(["es-compare", "--env", "CartPole-v1", "--methods", "pg",
                            "--method-config", "es=configs/cartpole.toml"]),
                   "--method-config 'es=configs/cartpole.toml': es is not among --methods (pg)")


def test_es_compare_checks_every_methods_policy_before_the_first_run(tmp_path):
    """A policy a method cannot train failed only once the runs before it had spent their
    budgets: es's from a module that does not import, a baseline's from any module."""
    config = tmp_path / "user_policy.toml"
    config.write_text('[policy]\nkind = "nomod:x"\n')
    out = tmp_path / "out"
    for method, fragment in [("es", "policy.kind = 'nomod:x': cannot import module 'nomod'"),
                             ("pg", "policy.kind = 'nomod:x': es-baseline pg trains its own "
                                    "networks (linear, mlp, cnn), not a user's policy")]:
        one_line_error(run_cli(["es-compare", "--env", "CartPole-v1", "--budget-s", "6",
                                "--methods", "pg,es", "--method-config", f"{method}={config}",
                                "--out", str(out)]),
                       f"config '{config}' of {method}: {fragment}")
        assert not out.exists()


def test_an_output_folder_that_cannot_be_written_is_refused_and_a_new_one_not_left(tmp_path):
    with pytest.raises(SpecError, match=r"'/proc/x/y': cannot be written"):
        output_folder("/proc/x/y")
    assert output_folder(str(tmp_path / "new/out")) == tmp_path / "new/out"
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(("override", "fragment"), [
    ("run.name=a/b", "run.name = 'a/b': must be at most 100 bytes without '/'"),
    (f"run.name={'x' * 300}", "run.name = '" + "x" * 40 + "'...: must be at most 100 bytes"),
    ("env.kwargs.render_mode=human", "env.kwargs.render_mode = 'human': es sets it"),
    # A constructor that stores a keyword unchecked failed in every episode instead.
    ("env.kwargs.sutton_barto_reward=1", "env.kwargs.sutton_barto_reward = 1: CartPole-v1 "
                                         "takes true or false (its default: False)"),
])
def test_names_and_kwargs_a_run_cannot_take_are_refused(tmp_path, override, fragment):
    one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--set", override,
                            "--run-dir", str(tmp_path / "run")]), fragment)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("override", "fragment"), [
    ("ctrl_cost_weight=abc", "ctrl_cost_weight = 'abc': Hopper-v5 takes a number (its "
                             "default: 0.001)"),
    # It reached mj_step, and every episode failed with a pybind TypeError.
    ("frame_skip=2.5", "frame_skip = 2.5: Hopper-v5 takes a whole number (its default: 4)"),
    # "cannot unpack non-iterable int object" in every episode.
    ("healthy_z_range=5", "healthy_z_range = 5: Hopper-v5 takes a list of 2 numbers (its "
                          "default: (0.7, inf))"),
    ("healthy_z_range=[0.7, 1.0, 3]", "healthy_z_range = [0.7, 1.0, 3]: Hopper-v5 takes a "
                                      "list of 2 numbers"),
    # The simulation stepped zero times, and the run trained on a body that never moved.
    ("frame_skip=-4", "frame_skip = -4: Hopper-v5 takes a whole number >= 1 (its default: 4)"),
    # Every episode ended at its first step.
    ("healthy_z_range=[2.0, 0.7]", "healthy_z_range = [2.0, 0.7]: Hopper-v5 takes a range "
                                   "[low, high], low <= high (its default: (0.7, inf))"),
])
def test_a_mujoco_keyword_of_the_wrong_type_is_refused_before_training(tmp_path, override,
                                                                         fragment):
    one_line_error(run_cli(["es-train", "configs/hopper_ars.toml", "--set",
                            f"env.kwargs.{override}", "--run-dir", str(tmp_path / "run")]),
                   f"env.kwargs.{fragment}")
    assert not (tmp_path / "run").exists()


def test_a_video_of_an_env_that_cannot_render_is_refused_before_its_episodes(tmp_path):
    folder = tmp_path / "run"
    assert run_cli(["es-train", "configs/cartpole.toml", "--set", "env.id=es/Sleep-v0",
                    "--set", "env.kwargs.step_ms=0.01", "--run-dir", str(folder),
                    *SHORT]).returncode == 0
    done = run_cli(["es-eval", str(folder), "--episodes", "1", "--video",
                    str(tmp_path / "v.mp4")])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == ("es-eval: error: --video: es/Sleep-v0 cannot render frames: its "
                           "render_modes are [], without 'rgb_array'\n")
    assert "mean" not in done.stdout  # no episode was played first


@pytest.mark.skipif(importlib.util.find_spec("Box2D") is not None, reason="Box2D is installed")
def test_an_env_whose_extra_is_missing_is_a_user_error(tmp_path):
    one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--set",
                            "env.id=LunarLander-v3", "--run-dir", str(tmp_path / "run")]),
                   "Box2D is not installed")


def test_seeds_with_a_run_seed_override_is_refused():
    one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--seeds", "0-1", "--set",
                            "run.seed=5"]), "--seeds sets run.seed for each run")


def test_a_config_toml_broken_by_hand_is_named_when_a_resume_writes_it_back(tmp_path):
    folder = tmp_path / "run"
    assert run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(folder),
                    *SHORT]).returncode == 0
    with (folder / "config.toml").open("a") as handle:
        handle.write("[[[broken\n")
    done = run_cli(["es-train", "--resume", str(folder), "--set", "run.generations=3",
                    "--quiet"])
    assert done.returncode == 0, done.stderr
    assert "config.toml is not valid TOML (" in done.stderr
    assert "[[[broken" not in (folder / "config.toml").read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="a small filesystem to fill needs root (tmpfs)")
def test_a_full_disk_leaves_no_half_run_and_a_run_it_stopped_starts_over(tmp_path):
    """Full from the start: a traceback and an es.lock left; full while the folder was
    written: a folder that read as a baseline's ("trained by , which keeps no checkpoints")
    and took --force; full at the first checkpoint: a run no --resume would continue."""
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3M", "tmpfs", str(small)], check=True)
    run = ["es-train", "configs/pendulum.toml", "--set", "run.generations=6", "--set",
           "run.eval_every=2", "--set", "run.checkpoint_every=3", "--quiet"]
    try:
        for free_kib, code, said in [(0, 2, "es-train: error: run folder "),
                                     (8, 2, "es-train: error: run folder "),
                                     (36, 1, "es-train: error on rank 0: OSError: ")]:
            filler = small / "filler"
            free = os.statvfs(small).f_bavail * os.statvfs(small).f_frsize // 1024
            with filler.open("wb") as handle:
                handle.truncate(0)
                handle.write(b"\0" * 1024 * max(free - free_kib, 0))
            folder = small / f"run{free_kib}"
            full = run_cli([*run, "--run-dir", str(folder)])
            assert full.returncode == code, full.stderr
            (line,) = [text for text in full.stderr.splitlines() if " error" in text]
            assert line.startswith(said) and "No space left on device" in line, line
            filler.unlink()
            if code == 2:  # refused before training: nothing left, and the same command runs
                assert not folder.exists()
                again = run_cli([*run, "--run-dir", str(folder)])
            else:
                assert line.endswith(f"no checkpoint was written yet: once {folder} can be "
                                     f"written again, es-train --resume {folder} starts it "
                                     "over"), line
                again = run_cli(["es-train", "--resume", str(folder), "--quiet"])
            assert again.returncode == 0, again.stderr
            assert len(read_progress(folder)) == 6
            subprocess.run(["rm", "-rf", str(folder)], check=True)
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_a_sweep_is_not_started_inside_a_single_runs_folder(tmp_path):
    """--seeds with --run-dir of a run's folder trained the sweep's runs beside its files, a
    mix that --resume-or-start then refused to continue."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.toml").write_text("")
    one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--seeds", "0,1", "--run-dir",
                            str(folder), *SHORT]),
                   f"--run-dir {str(folder)!r} holds one run, not a sweep's")
    assert sorted(path.name for path in folder.iterdir()) == ["config.toml"]
