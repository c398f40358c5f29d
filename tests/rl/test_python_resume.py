"""``es.resume``: a run stopped from Python (a callback, a notebook's interrupt, a lost rank)
continues from Python, to the bits of a run never stopped; what it may change and whom it
refuses. (Two ranks: tests/rl/test_callbacks.py's mpiexec test; the CLI's ``--resume``:
test_reliability.py.)"""

import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, stopping_a_rank, tool, wait_for_a_checkpoint

import es
from es.config import ConfigError
from es.rl.checkpoint import load_latest_checkpoint

PENDULUM = {"es.population": 10, "env.max_episode_steps": 50, "run.eval_every": 2,
            "run.eval_episodes": 1, "run.generations": 8}


def stopped_at(generation: int):
    return lambda row: row["generation"] < generation


def test_a_run_stopped_by_its_callback_resumes_to_the_bits_of_one_never_stopped(tmp_path):
    whole = es.train(REPO / "configs/pendulum.toml", PENDULUM, run_dir=tmp_path / "whole")
    part = es.train(REPO / "configs/pendulum.toml", PENDULUM, run_dir=tmp_path / "part",
                    callback=stopped_at(3))
    assert part.generations == 3
    rows = []
    resumed = es.resume(tmp_path / "part", callback=lambda row: rows.append(row["generation"]))
    assert rows == [4, 5, 6, 7, 8] and resumed.ended_by == "run.generations = 8"
    np.testing.assert_array_equal(resumed.saved.params, whole.saved.params)
    assert (resumed.best.generation, resumed.best_return) == (whole.best.generation,
                                                              whole.best_return)
    def trained(history):  # the columns that no clock, memory or resume changes
        return [{k: v for k, v in row.items() if not k.endswith("_s")
                 and k not in ("peak_rss_mb", "resumed_from")} for row in history]

    assert trained(resumed.history) == trained(whole.history)
    assert [row["resumed_from"] for row in resumed.history] == [0] * 3 + [3] * 5
    more = es.resume(tmp_path / "part", {"run.generations": np.int64(10)})  # a budget moves
    assert more.generations == 10 and len(more.history) == 10


def test_only_budgets_change_and_a_refusal_names_what_it_refused(tmp_path):
    run_dir = tmp_path / "run"
    es.train(REPO / "configs/pendulum.toml", PENDULUM, run_dir=run_dir, callback=stopped_at(2))
    with pytest.raises(ConfigError, match=rf"^es.resume '{run_dir}': es.sigma cannot change: "
                                          r"a resumed run keeps its config; only "
                                          r"run.generations, run.max_timesteps"):
        es.resume(run_dir, {"es.sigma": 0.1})
    with pytest.raises(ConfigError, match=rf"^es.resume '{tmp_path / 'none'}': no such run "):
        es.resume(tmp_path / "none")
    with pytest.raises(ConfigError, match=r"policy=<function .*<lambda> .*: the run was trained "
                                          r"with policy.kind = 'mlp'; pass that one"):
        es.resume(run_dir, policy=lambda spaces, action: None)
    with pytest.raises(ConfigError, match=r"^overrides \['run.generations'\]: must be a dict"):
        es.resume(run_dir, ["run.generations"])
    with pytest.raises(ConfigError, match=r"^quiet 'no': must be True or False$"):
        es.resume(run_dir, quiet="no")
    # Each refusal let go of the folder: the run continues.
    assert es.resume(run_dir).generations == 8


MINE = """
import sys
import numpy as np
import es

class Linear:  # defined in __main__, as in a notebook
    def __init__(self, observation_space, action_space):
        self.shape = (action_space.n, observation_space.shape[0])
        self.num_params = self.shape[0] * self.shape[1]
    def initial_params(self, rng):
        return np.zeros(self.num_params, np.float32)
    def act(self, params, observation, state):
        return int(np.argmax(params.reshape(self.shape) @ observation)), state

run_dir, step = sys.argv[1], sys.argv[2]
if step == "train":
    es.train("configs/cartpole.toml", {"es.population": 8, "run.generations": 5},
             run_dir=run_dir, policy=Linear, callback=lambda row: row["generation"] < 2)
else:
    print("RESUMED", es.resume(run_dir, policy=Linear).generations)
"""


def test_a_policy_defined_in_main_is_given_again_and_a_resume_without_it_says_so(tmp_path):
    script, run_dir = tmp_path / "mine.py", tmp_path / "run"
    script.write_text(MINE)

    def step(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *command], cwd=REPO, capture_output=True,
                              text=True, timeout=120)

    assert step(str(script), str(run_dir), "train").returncode == 0
    bare = step("-c", f"import es; es.resume({str(run_dir)!r})")  # another __main__
    assert bare.returncode == 1 and bare.stderr.strip().splitlines()[-1] == (
        "es.rl.policies.PolicyError: policy.kind = '__main__:Linear': module '__main__' has no "
        "'Linear': it was defined in the notebook or script that trained the run; give it "
        "from Python again (es.resume(RUN_DIR, policy=...)), or move it into a module that "
        "es-train and es-eval can import"), bare.stderr
    given = step(str(script), str(run_dir), "given")
    assert given.returncode == 0 and "RESUMED 5" in given.stdout, given.stderr


LOSES_A_RANK = """
import os, sys
import es
from es.parallel.comm import MPIComm

comm = MPIComm()
pids = comm.allgather_objects(os.getpid())
if comm.rank == 0:  # one line: two ranks' prints may come out mixed in one
    print("PIDS", *pids, flush=True)
es.train("configs/cartpole.toml", {"es.population": 8, "run.generations": 10**6,
                                   "run.max_seconds": 600, "run.peer_timeout_s": 3},
         run_dir=sys.argv[1], comm=comm)
"""


def test_es_train_under_mpiexec_ends_a_job_with_a_stopped_rank_and_es_resume_goes_on(tmp_path):
    """es.train had no heartbeat: a stopped rank left the other waiting in the next
    exchange for good. Now the job ends as es-train's does (exit 76, naming the rank)."""
    run_dir = tmp_path / "run"
    job = subprocess.Popen([tool("mpiexec"), "-n", "2", sys.executable, "-c", LOSES_A_RANK,
                            str(run_dir)], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    with stopping_a_rank(job, 3) as stop:
        pids = job.stdout.readline().split()[1:]
        wait_for_a_checkpoint(job, run_dir, timeout=60)
        line = stop(int(pids[1]))
    assert re.fullmatch(rf"es.train: peer lost: rank 1 \(pid {pids[1]} on \S+\) silent for 3 "
                        r"s \(no heartbeat within run.peer_timeout_s = 3 s: stopped, hung or cut "
                        r"off\) while rank 0 was in generation \d+; the newest checkpoint is "
                        r"intact: resume on the ranks that are left: " + re.escape(
                            f"es.resume('{run_dir}') or es-train --resume {run_dir} (exit code "
                            "76)"), line), line
    deadline = time.monotonic() + 30  # rank 0, aborted, lets go of the folder as it ends
    while Path(f"/proc/{pids[0]}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    state, _, _ = load_latest_checkpoint(run_dir / "checkpoints")
    budget = {"run.generations": state.generation + 2}
    resumed = es.resume(run_dir, budget)
    whole = es.train(REPO / "configs/cartpole.toml", {
        "es.population": 8, "run.max_seconds": 600, "run.peer_timeout_s": 3, **budget},
        run_dir=tmp_path / "whole")
    np.testing.assert_array_equal(resumed.saved.params, whole.saved.params)
