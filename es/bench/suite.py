"""``es-bench suite``: tasks x strategies x seeds, each run a real ``mpiexec es-train``, its
final and its kept policy scored on fresh episodes: success rates, times to thresholds and
whether the kept policy holds on every episode, over seeds.

    es-bench suite configs/suites/mujoco.toml --tasks swimmer,halfcheetah --seeds 0-4
    es-bench suite configs/suites/mujoco.toml --strategies openai,ars --jobs 1 --ranks 2

A suite file names its tasks; each gives its thresholds, a budget (``budget_s`` wall seconds of
training and/or ``budget_steps`` env steps) and one config per strategy::

    eval_episodes = 5        # thresholds are judged on evaluations of at least this many
    final_episodes = 20      # the final policy's score: this many fresh episodes

    [tasks.halfcheetah]
    thresholds = [3430, 5000]
    budget_s = 180
    strategies = { openai = "configs/halfcheetah.toml", ars = "configs/halfcheetah_ars.toml" }
    # or a config plus overrides, as es-train --set takes them:
    # strategies.snes = { config = "configs/halfcheetah.toml", set = ["es.strategy=snes"] }

A run is ``mpiexec -n RANKS es-train CONFIG --set run.seed=SEED`` with the budget as
``run.max_seconds`` / ``run.max_timesteps``; it trains to its budget (no early stop, so the
final score is the budget's, unless the config ends its runs at ``run.target_score``), then
``es-eval --episodes FINAL --json`` scores the mean policy on the same fresh episodes (seeds
12345, 12346, ...) for every run, and ``--policy best`` the kept one (``policy_best.npz``: the
best evaluation, confirmed on 20 episodes of its own); the kept policy is *steady* at a
threshold when its mean reaches it and its worst episode reaches 0.8 times it. Times to a
threshold are the training seconds (``time_s`` of ``progress.csv``: start-up excluded, resumed
sessions added up, pauses taken out: ``paused_s``, see ``pauses``) and env steps at the first
evaluation that reached it. Thresholds are judged on evaluations of ``max(eval_episodes, the
config's)`` episodes: a lucky pair of episodes does not count.

The suite resumes: a run with its ``final.json`` is done and not redone; a run that was
interrupted continues with ``es-train --resume`` (exact, see the README), and one killed before
it wrote its config starts again. ``--jobs J`` runs J runs at a time, each on ``--ranks``
ranks. Outputs in ``--out`` (default ``bench-results/suite/<suite file's stem>``; it remembers
its suite file in ``suite.txt`` and refuses another suite's), covering every finished run in
the folder of the seeds asked for (every task and strategy, this call's and earlier ones'; a
call with other seeds tables those, training only what is not done): ``runs.csv`` (one row
per run), ``results.md`` (per task and strategy: final score median/worst/best, the kept
policy's median and worst mean and its worst episode, seeds reaching each threshold, median
and worst time and steps to it, seeds whose kept policy is steady at it; then per run the
final and kept policy's mean and worst episode, steps and seconds to each threshold, the
seconds it stood paused and the machine's bare-loop rate, measured before the run:
``yardstick``) and ``suite.png`` (median and quartile band of the evaluation return against
training seconds and against steps, one line per strategy).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from es.bench.report import markdown as table
from es.bench.report import out_folder, run_interruptible
from es.core.exit_codes import CHECKPOINTED, PEER_LOST
from es.core.install import install_hint

BIN = Path(sys.executable).parent
FINAL_SEED = 12345  # es-eval's default: the same fresh episodes for every run
#: Seconds of bare stepping that measure the machine before a run (``yardstick``).
YARDSTICK_S = 3.0
STEADY_WORST = 0.8  # steady: the kept policy's worst episode reaches this fraction too
SUITE_KEYS = {"eval_episodes", "final_episodes", "tasks"}
TASK_KEYS = {"thresholds", "budget_s", "budget_steps", "strategies"}
NO_GENERATION_LIMIT = 10**9  # the budget ends a run, not run.generations
#: A pause (SIGSTOP) shows in ``progress.csv`` as one gap between consecutive generations'
#: ``time_s`` this many times the median of the PAUSE_WINDOW gaps around it, and
#: PAUSE_MARGIN_S seconds beyond it (an evaluation or a confirmation lengthens its generation
#: far less).
PAUSE_FACTOR = 3.0
PAUSE_WINDOW = 21
PAUSE_MARGIN_S = 60.0


@dataclass(frozen=True)
class Entry:
    config: str
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    name: str
    thresholds: tuple[float, ...]
    budget_s: float
    budget_steps: int
    configs: dict[str, Entry]  # strategy -> its config and overrides


@dataclass(frozen=True)
class Suite:
    eval_episodes: int
    final_episodes: int
    tasks: dict[str, Task]


@dataclass(frozen=True)
class Run:
    task: Task
    strategy: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.task.name}-{self.strategy}-seed{self.seed}"


def _number(where: str, value: Any, integer: bool = False, minimum: float = 0.0) -> float:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) \
            or value < minimum:
        kind = "an integer" if integer else "a finite number"
        bound = f" >= {minimum:g}" if math.isfinite(minimum) else ""
        raise ValueError(f"{where} = {value!r}: must be {kind}{bound}")
    return value


def load_suite(path: Path) -> Suite:
    """The suite file, checked: one-line errors naming the bad key (an unreadable file or bad
    TOML: the config loader's one-line ``ConfigError``, a ``ValueError``)."""
    from es.config import read_toml

    data = read_toml(path, "suite file")
    unknown = sorted(set(data) - SUITE_KEYS)
    if unknown:
        raise ValueError(f"suite {str(path)!r}: unknown key {unknown[0]!r} "
                         f"(allowed: {', '.join(sorted(SUITE_KEYS))})")
    tasks: dict[str, Task] = {}
    if not isinstance(data.get("tasks", {}), dict):
        raise ValueError(f"suite {str(path)!r}: tasks = {data['tasks']!r}: expected "
                         "[tasks.NAME] tables")
    for name, entry in data.get("tasks", {}).items():
        if not isinstance(entry, dict):
            raise ValueError(f"tasks.{name}: expected a table")
        unknown = sorted(set(entry) - TASK_KEYS)
        if unknown:
            raise ValueError(f"tasks.{name}.{unknown[0]}: unknown key "
                             f"(allowed: {', '.join(sorted(TASK_KEYS))})")
        strategies = entry.get("strategies")
        if not isinstance(strategies, dict) or not strategies:
            raise ValueError(f"tasks.{name}.strategies: expected {{strategy = \"config.toml\"}}")
        for label in (name, *strategies):  # they name run folders
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
                raise ValueError(f"tasks.{name}: {label!r} names a run folder: letters, "
                                 "digits, '_', '.' and '-' only")
        thresholds = entry.get("thresholds", [])
        if not isinstance(thresholds, list) or not thresholds:
            raise ValueError(f"tasks.{name}.thresholds: expected a non-empty list of numbers")
        budget_s = _number(f"tasks.{name}.budget_s", entry.get("budget_s", 0))
        budget_steps = _number(f"tasks.{name}.budget_steps", entry.get("budget_steps", 0),
                               integer=True)
        if not budget_s and not budget_steps:
            raise ValueError(f"tasks.{name}: give budget_s or budget_steps (or both)")
        configs = {strategy: parse_entry(f"tasks.{name}.strategies.{strategy}", value)
                   for strategy, value in strategies.items()}
        for strategy, item in configs.items():
            check_config(f"tasks.{name}.strategies.{strategy}", config_path(path, item.config),
                         item.overrides, strategy)
        tasks[name] = Task(name, tuple(float(_number(f"tasks.{name}.thresholds", t,
                                                     minimum=-math.inf)) for t in thresholds),
                           float(budget_s), int(budget_steps), dict(configs))
    if not tasks:
        raise ValueError(f"suite {str(path)!r}: no [tasks.NAME] in it")
    eval_episodes = int(_number("eval_episodes", data.get("eval_episodes", 5), integer=True))
    final_episodes = int(_number("final_episodes", data.get("final_episodes", 20), integer=True))
    if eval_episodes < 1 or final_episodes < 1:
        raise ValueError("eval_episodes and final_episodes must be >= 1")
    return Suite(eval_episodes, final_episodes, tasks)


def parse_entry(where: str, value: Any) -> Entry:
    """``"config.toml"`` or ``{ config = "config.toml", set = ["key=value", ...] }``."""
    if isinstance(value, str):
        return Entry(value)
    if isinstance(value, dict) and set(value) <= {"config", "set"} and isinstance(
            value.get("config"), str) and isinstance(value.get("set", []), list) and all(
            isinstance(item, str) for item in value.get("set", [])):
        return Entry(value["config"], tuple(value.get("set", [])))
    raise ValueError(f"{where}: expected \"config.toml\" or {{ config = \"config.toml\", "
                     "set = [\"key=value\", ...] }")


def config_path(suite_file: Path, config: str) -> Path:
    """Configs are paths relative to the working folder, or else to the suite file, or else a
    shipped config's name (``configs/cartpole.toml``, ``cartpole``: es.config.locate_config)."""
    from es.config import locate_config

    beside = Path(suite_file).parent / config
    if not Path(config).is_file() and beside.is_file():
        return beside
    return locate_config(config)  # the given path itself where it is a file


def check_config(where: str, config: Path, overrides: tuple[str, ...], strategy: str) -> None:
    """The config loads (with its overrides) and trains with the strategy it is listed
    under."""
    from es.config import ConfigError, load_config

    try:
        loaded = load_config(config, list(overrides))
    except ConfigError as error:
        raise ValueError(f"{where}: {error}") from None
    if loaded.es.strategy != strategy:
        raise ValueError(f"{where}: {str(config)!r} trains with es.strategy = "
                         f"{loaded.es.strategy!r}, not {strategy!r}")


def config_eval_episodes(config: Path, overrides: tuple[str, ...]) -> int:
    from es.config import load_config

    return load_config(config, list(overrides)).run.eval_episodes


def run_folder(out: Path, run: Run) -> Path:
    return out / "runs" / run.name


def run_config(suite: Suite, suite_file: Path, entry: Entry, seed: int) -> tuple[Path, list[str]]:
    """A suite config's file and the overrides the suite trains it with, budgets aside: the
    entry's own, the seed, and at least the suite's evaluation episodes."""
    episodes = run_eval_episodes(suite, suite_file, entry)
    return config_path(suite_file, entry.config), [
        *entry.overrides, f"run.seed={seed}", f"run.eval_episodes={episodes}"]


def run_eval_episodes(suite: Suite, suite_file: Path, entry: Entry) -> int:
    """The evaluation episodes a suite run trains with: its config's, at least the suite's."""
    config = config_path(suite_file, entry.config)
    return max(suite.eval_episodes, config_eval_episodes(config, entry.overrides))


def train_command(run: Run, suite: Suite, suite_file: Path, run_dir: Path, ranks: int,
                  launcher: list[str]) -> list[str]:
    """Resume an interrupted run; else start it from its config."""
    if (run_dir / "config.toml").is_file():
        return [*launcher, "-n", str(ranks), str(BIN / "es-train"), "--resume", str(run_dir),
                "--quiet"]
    config, chosen = run_config(suite, suite_file, run.task.configs[run.strategy], run.seed)
    overrides = [*chosen, f"run.generations={NO_GENERATION_LIMIT}",
                 f"run.max_seconds={run.task.budget_s}",
                 f"run.max_timesteps={run.task.budget_steps}"]
    sets = [item for override in overrides for item in ("--set", override)]
    return [*launcher, "-n", str(ranks), str(BIN / "es-train"), str(config), "--run-dir",
            str(run_dir), "--quiet", *sets]


def yardstick(config: Path, overrides: tuple[str, ...]) -> float:
    """Env steps/s of this process stepping the run's environment with seeded random actions
    for ``YARDSTICK_S``: the machine's bare-loop rate, written beside the run's times
    (machines of one kind differ by up to 2x, so a time means little without it). Measured
    once per environment in a suite call."""
    from es.config import load_config
    from es.rl.envs import env_from_config
    from es.rl.rollout import random_policy, run_episode

    loaded = load_config(config, list(overrides))
    key = json.dumps([loaded.env.id, loaded.env.max_episode_steps, loaded.env.kwargs],
                     sort_keys=True)
    if key not in _MEASURED:
        env = env_from_config(loaded)
        steps, episode, started = 0, 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < YARDSTICK_S:
            steps += run_episode(env, random_policy(env, episode), seed=episode).length
            episode += 1
        env.close()
        _MEASURED[key] = steps / elapsed
    return _MEASURED[key]


_MEASURED: dict[str, float] = {}  # yardstick's, by environment


def execute(run: Run, suite: Suite, suite_file: Path, out: Path, ranks: int,
            launcher: list[str]) -> dict[str, Any]:
    """Train (or resume) one run, score its final policy; its row of ``runs.csv``."""
    run_dir = run_folder(out, run)
    final = run_dir / "final.json"
    if not final.is_file() and trained_to_its_budget(run_dir):  # interrupted while scored
        score_final(run_dir, suite.final_episodes, run.name)
    elif not final.is_file():
        if run_dir.exists() and not (run_dir / "config.toml").is_file():
            shutil.rmtree(run_dir)  # killed before es-train wrote anything to resume from
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        measured = run_folder(out, run).with_name(f"{run.name}.yardstick.json")
        if not measured.is_file():  # measured once, before the run's first session
            entry = run.task.configs[run.strategy]
            rate = yardstick(config_path(suite_file, entry.config), entry.overrides)
            measured.write_text(json.dumps({"bare_steps_per_s": rate, "ranks": ranks}))
        elif not (run_dir / "config.toml").is_file():  # begins again: on these ranks
            measured.write_text(json.dumps({**_yardstick(run_dir), "ranks": ranks}))
        command = train_command(run, suite, suite_file, run_dir, ranks, launcher)
        returncode, stderr = supervised(command)
        if returncode in (CHECKPOINTED, PEER_LOST):
            raise RunStopped(f"{run.name}: es-train stopped with its checkpoint (exit "
                             f"{returncode}: {last_line(stderr)})")
        if returncode != 0:
            raise RuntimeError(f"{run.name}: es-train exited with {returncode}: "
                               f"{last_line(stderr)}")
        score_final(run_dir, suite.final_episodes, run.name)
    return run_row(run, run_dir)


def score_final(run_dir: Path, episodes: int, label: str) -> None:
    """Score the run's kept policy (if it kept one) into ``kept.json``, then its final policy
    into ``final.json``, which marks the run done; each on ``episodes`` fresh episodes (seeds
    from ``FINAL_SEED``), written under another name first, so an interrupted scoring never
    leaves a partial one."""
    if (run_dir / "policy_best.npz").is_file():
        score_policy(run_dir, "best", episodes, run_dir / "kept.json", label)
    score_policy(run_dir, "final", episodes, run_dir / "final.json", label)


def score_policy(run_dir: Path, policy: str, episodes: int, path: Path, label: str) -> None:
    part = path.with_suffix(".part")
    score = subprocess.run([str(BIN / "es-eval"), str(run_dir), "--policy", policy,
                            "--episodes", str(episodes), "--seed", str(FINAL_SEED),
                            "--json", str(part)], capture_output=True, text=True)
    if score.returncode != 0:
        raise RuntimeError(f"{label}: es-eval --policy {policy} exited with "
                           f"{score.returncode}: {last_line(score.stderr)}")
    part.rename(path)


_LIVE: set[subprocess.Popen] = set()  # training processes running now
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()  # set when the call stops: no training starts after it


class Cancelled(Exception):
    """A run that was about to start when the call stopped."""


def supervised(command: list[str]) -> tuple[int, str]:
    """Run ``command``, known to ``stop_all`` while it runs; (exit code, stderr). Started
    under the lock ``stop_all`` takes, so none starts after it has looked."""
    with _LIVE_LOCK:
        if _STOPPING.is_set():
            raise Cancelled(" ".join(command))
        # A session of its own: a terminal's Ctrl-C reaches it once, from stop_all. Reached
        # directly too, mpiexec took stop_all's copy for a second Ctrl-C and ended the job
        # without the stop's checkpoint (MPICH's Hydra: exit 255).
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        _LIVE.add(process)
    try:
        _, stderr = process.communicate()
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(process)
    return process.returncode, stderr


def stop_all(grace_s: float = 60.0) -> None:
    """Interrupt every running training (SIGINT: es-train checkpoints on its way out, so the
    next ``es-bench suite`` resumes it) and wait for them; kill what is still there after
    ``grace_s``."""
    with _LIVE_LOCK:
        _STOPPING.set()
        processes = list(_LIVE)
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
    for process in processes:
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()


class RunStopped(Exception):
    """A training stopped from outside with its checkpoint written (a signal to es-train, not
    to the suite; a lost rank): the suite stops as if interrupted, to be resumed."""


def run_all(work: Callable[[Any], Any], items: list[Any], jobs: int, program: str,
            out: Path) -> None:
    """``work`` on every item, ``jobs`` at a time. Ctrl-C or SIGTERM (see ``run_interruptible``),
    a training stopped from outside, or a failed one cancels what has not started and
    interrupts the trainings that have, which leave their folders to be resumed or redone by
    the next call (an error must not leave the next run training with nobody to stop it)."""
    _STOPPING.clear()

    def guarded(item: Any) -> Any:
        """``work(item)``; after a failure on any thread, the items not begun are skipped
        (the pool would otherwise start the next before the main thread hears of it)."""
        if _STOPPING.is_set():
            return None
        try:
            return work(item)
        except BaseException:
            _STOPPING.set()
            raise

    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [pool.submit(guarded, item) for item in items]
        # The first failure, whichever item: waiting in item order would let a later run's
        # failure wait behind an earlier run's whole training.
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failures = sorted((future.exception() for future in futures
                           if future in done and future.exception() is not None),
                          key=lambda error: isinstance(error, Cancelled))  # the cause first
        if failures:
            raise failures[0]
    except BaseException as error:
        pool.shutdown(wait=False, cancel_futures=True)
        stop_all()
        if not isinstance(error, KeyboardInterrupt | RunStopped):
            raise
        why = f"{error}; " if isinstance(error, RunStopped) else ""
        print(f"{program}: {why}interrupted; run it again to resume ({out})", file=sys.stderr)
        raise KeyboardInterrupt from None
    pool.shutdown()


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


def read_progress(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "progress.csv").open() as handle:
        return list(csv.DictReader(handle))


def pauses(rows: list[dict[str, str]]) -> np.ndarray:
    """Per progress row, the seconds the run stood paused just before it that its ``time_s``
    still counts: es-train leaves the stops it saw out of ``time_s`` (``paused_s``), but the
    runs of before it did not, so a run stopped (SIGSTOP) for a measurement beside it counted
    the pause as training. Such a pause is a gap between consecutive rows' ``time_s`` over
    PAUSE_FACTOR times the median of the PAUSE_WINDOW gaps around it and PAUSE_MARGIN_S beyond
    it, less that median. (A resumed session leaves no gap: it continues its checkpoint's
    clock.)"""
    times = np.array([float(row["time_s"]) for row in rows], dtype=np.float64)
    gaps = np.diff(times)
    paused = np.zeros(len(rows))
    half = PAUSE_WINDOW // 2
    for index, gap in enumerate(gaps):
        usual = float(np.median(gaps[max(0, index - half):index + half + 1]))
        if gap > PAUSE_FACTOR * usual and gap > usual + PAUSE_MARGIN_S:
            paused[index + 1] = gap - usual
    return paused


def recorded_pause_s(rows: list[dict[str, str]]) -> float:
    """The seconds es-train saw the run stopped and left out of ``time_s`` itself (its last
    row's ``paused_s``; 0 for a run of before that column)."""
    return float(rows[-1].get("paused_s") or 0.0) if rows else 0.0


def running_seconds(rows: list[dict[str, str]]) -> np.ndarray:
    """Per progress row, the training seconds so far with the pauses before it taken out."""
    times = np.array([float(row["time_s"]) for row in rows], dtype=np.float64)
    # Rounded to the microsecond: the subtraction's float noise is not a figure.
    return np.round(times - np.cumsum(pauses(rows)), 6)


def evaluations(rows: list[dict[str, str]]) -> list[tuple[float, int, float]]:
    """(training seconds, env steps, eval return) of every evaluation of the mean policy, the
    seconds without the run's pauses."""
    seconds = running_seconds(rows)
    return [(float(t), int(r["timesteps"]), float(r["eval_return"]))
            for t, r in zip(seconds, rows, strict=True) if r.get("eval_return")]


def run_row(run: Run, run_dir: Path) -> dict[str, Any]:
    rows = read_progress(run_dir)
    evals = evaluations(rows)
    final = json.loads((run_dir / "final.json").read_text())
    returns = np.array(final["returns"], dtype=np.float64)
    row: dict[str, Any] = {
        "task": run.task.name, "strategy": run.strategy, "seed": run.seed,
        "config": " ".join([run.task.configs[run.strategy].config,
                            *run.task.configs[run.strategy].overrides]),
        "budget_s": run.task.budget_s,
        "budget_steps": run.task.budget_steps, "generations": int(rows[-1]["generation"]) + 1,
        "train_s": float(running_seconds(rows)[-1]),
        "paused_s": round(float(pauses(rows).sum()) + recorded_pause_s(rows), 6),
        "steps": int(rows[-1]["timesteps"]),
        "best_eval": max((e for _, _, e in evals), default=math.nan),
        "final_mean": float(returns.mean()), "final_std": float(returns.std()),
        "final_min": float(returns.min()), "final_episodes": len(returns),
        "final_failed": int(final["failed"]),
        **kept_columns(run_dir),
        **cost_columns(rows, stops_confirm_s(run_dir)),
        "bare_steps_per_s": bare_rate(run_dir),
    }
    for threshold in run.task.thresholds:
        first = next(((t, s) for t, s, e in evals if e >= threshold), None)
        row[f"time_to_{threshold:g}"] = first[0] if first else ""
        row[f"steps_to_{threshold:g}"] = first[1] if first else ""
        row[f"steady_{threshold:g}"] = steady(row, threshold)
    return row


def _yardstick(run_dir: Path) -> dict[str, Any]:
    """What was written beside the run before its first session: the machine's bare-loop
    rate (``yardstick``) and the ranks it began on; {} for runs from before either was."""
    measured = run_dir.with_name(f"{run_dir.name}.yardstick.json")
    return json.loads(measured.read_text()) if measured.is_file() else {}


def bare_rate(run_dir: Path) -> float | str:
    """The machine's bare-loop rate measured before the run; empty where it was not."""
    return _yardstick(run_dir).get("bare_steps_per_s", "")


def began_on(run_dir: Path) -> int | None:
    """The ranks the run's first session trained on; None for runs from before it was kept."""
    return _yardstick(run_dir).get("ranks")


def trained_to_its_budget(run_dir: Path) -> bool:
    """Whether the run's last stop was its budget's end (``run.max_seconds = ...``), not a
    signal's: it needs only its scoring, and a resume would play the stop's confirmations
    again (counted twice in its costs)."""
    from es.rl.metrics import read_stops

    stops = read_stops(run_dir)
    return bool(stops) and stops[-1]["ended_by"].startswith("run.")


def stop_confirmations(run_dir: Path) -> tuple[int, float]:
    """The episodes and rank 0's seconds confirming nominations at the run's stops
    (``stops.csv``): after the last progress row, so in none of its columns."""
    from es.rl.metrics import read_stops

    stops = read_stops(run_dir)
    return (sum(int(stop["confirm_episodes"]) for stop in stops),
            sum(float(stop["confirm_s"]) for stop in stops))


def stops_confirm_s(run_dir: Path) -> float:
    """Rank 0's seconds confirming nominations at the run's stops."""
    return stop_confirmations(run_dir)[1]


def column_sum(rows: list[dict[str, str]], column: str) -> float:
    """A progress.csv column's sum over the run (empty cells count 0)."""
    return sum(float(row.get(column) or 0) for row in rows)


def ranks_sum(rows: list[dict[str, str]], kind: str) -> float:
    """The ranks' mean seconds in ``kind`` ("eval", "confirm") episodes over the run: what
    they cost the machine (``<kind>_ranks_s``); rank 0's own (``<kind>_s``) for rows written
    before that column was."""
    return sum(float(row.get(f"{kind}_ranks_s") or row.get(f"{kind}_s") or 0) for row in rows)


def cost_columns(rows: list[dict[str, str]], stop_s: float) -> dict[str, float]:
    """What evaluations, confirmations and waits cost the run, as shares of the time it ran
    (its wall time less its pauses): the ranks' mean seconds in evaluation and confirmation
    episodes (the stops' confirmations, ``stop_s`` from ``stops_confirm_s``, included: every
    rank plays them), and rank 0's seconds waiting in the exchanges."""
    ran = float(running_seconds(rows)[-1]) + stop_s
    return {"eval_share": ranks_sum(rows, "eval") / ran,
            "confirm_share": (ranks_sum(rows, "confirm") + stop_s) / ran,
            "wait_share": column_sum(rows, "wait_s") / ran}


def kept_columns(run_dir: Path) -> dict[str, Any]:
    """The kept policy's score (``kept.json``): its mean, worst episode and generation; empty
    cells for a run that kept none (``run.best_episodes = 0``, or scored before it existed)."""
    path = run_dir / "kept.json"
    if not path.is_file():
        return {"kept_mean": "", "kept_min": "", "kept_generation": ""}
    kept = json.loads(path.read_text())
    returns = np.array(kept["returns"], dtype=np.float64)
    # A failed episode is a worst episode too: it is missing from "returns".
    worst = float(returns.min()) if not kept["failed"] else -math.inf
    return {"kept_mean": float(returns.mean()), "kept_min": worst,
            "kept_generation": int(kept["generation"])}


def steady(row: dict[str, Any], threshold: float) -> bool | str:
    """The kept policy holds at ``threshold``: its mean reaches it and its worst episode
    reaches ``STEADY_WORST`` times it (below 0, where that would ask more of the worst
    episode than of the mean, the worst may be 1 / STEADY_WORST times the threshold)."""
    if row["kept_mean"] == "":
        return ""
    bar = threshold * (STEADY_WORST if threshold >= 0 else 1 / STEADY_WORST)
    return row["kept_mean"] >= threshold and row["kept_min"] >= bar


def summary_rows(rows: list[dict[str, Any]], tasks: dict[str, Task]) -> list[dict[str, Any]]:
    """Per task and strategy: the final score over seeds and, per threshold, how many seeds
    reached it and the median and worst time and steps (worst: empty unless every seed did;
    the Markdown shows an empty cell as "—", a CSV reader gets no number)."""
    summary = []
    for key in dict.fromkeys((r["task"], r["strategy"]) for r in rows):
        group = [r for r in rows if (r["task"], r["strategy"]) == key]
        finals = [r["final_mean"] for r in group]
        entry: dict[str, Any] = {
            "task": key[0], "strategy": key[1], "seeds": len(group),
            "final_median": float(np.median(finals)), "final_worst": min(finals),
            "final_best": max(finals),
        }
        kept = [r for r in group if r["kept_mean"] != ""]
        entry |= {"kept_median": float(np.median([r["kept_mean"] for r in kept])) if kept
                  else "",
                  "kept_worst": min(r["kept_mean"] for r in kept) if kept else "",
                  "kept_worst_episode": min(r["kept_min"] for r in kept) if kept else ""}
        for threshold in tasks[key[0]].thresholds:
            times = [r[f"time_to_{threshold:g}"] for r in group]
            steps = [r[f"steps_to_{threshold:g}"] for r in group]
            reached = [(t, s) for t, s in zip(times, steps, strict=True) if t != ""]
            everyone = len(reached) == len(group)
            entry[f"reached_{threshold:g}"] = f"{len(reached)}/{len(group)}"
            # Seeds that never reached it count as infinitely slow: the median exists only
            # while at least half of them did.
            ordered = sorted([t for t, _ in reached] + [math.inf] * (len(group) - len(reached)))
            ordered_steps = sorted([s for _, s in reached]
                                   + [math.inf] * (len(group) - len(reached)))
            entry[f"median_s_{threshold:g}"] = _median_or_empty(ordered)
            entry[f"worst_s_{threshold:g}"] = max(t for t, _ in reached) if everyone else ""
            entry[f"median_steps_{threshold:g}"] = _median_or_empty(ordered_steps, whole=True)
            entry[f"worst_steps_{threshold:g}"] = (max(s for _, s in reached) if everyone
                                                   else "")
            entry[f"steady_{threshold:g}"] = (
                f"{sum(1 for r in kept if r[f'steady_{threshold:g}'])}/{len(group)}")
        summary.append(entry)
    return summary


def _median_or_empty(ordered: list[float], whole: bool = False) -> float | int | str:
    """The median, empty if infinite; ``whole``: rounded to an int (steps)."""
    value = float(np.median(ordered))
    if not math.isfinite(value):
        return ""
    return round(value) if whole else value


#: The per-run table of results.md: the final and the kept policy seed by seed.
RUN_COLUMNS = ("strategy", "seed", "final_mean", "final_min", "kept_mean", "kept_min",
               "kept_generation")


def markdown(summary: list[dict[str, Any]], runs: list[dict[str, Any]],
             tasks: dict[str, Task], title: str) -> str:
    parts = [f"## {title}\n"]
    for name, task in tasks.items():
        rows = [r for r in summary if r["task"] == name]
        if not rows:
            continue
        budget = " and ".join(part for part in (
            f"{task.budget_s:g} s" if task.budget_s else "",
            f"{task.budget_steps:,} steps" if task.budget_steps else "") if part)
        parts.append(f"### {name} (budget {budget})\n")
        parts.append(table(rows, [c for c in rows[0] if c != "task"]))
        per_run = [r for r in runs if r["task"] == name]
        columns = [*RUN_COLUMNS, *(f"{kind}_{t:g}" for t in task.thresholds
                                   for kind in ("steps_to", "time_to", "steady")),
                   "paused_s", "bare_steps_per_s"]
        parts.append(f"Seed by seed ({name}): the final and the kept policy's mean and worst "
                     "episode; env steps and seconds to each threshold (the seconds the run "
                     "stood paused left out), beside the machine's bare-loop rate (steps/s of "
                     "one process with random actions, measured before the run)\n")
        parts.append(table(per_run, columns))
    return "\n".join(parts)


def curves(rows_by_run: dict[str, list[tuple[float, int, float]]], axis: int,
           grid: np.ndarray) -> np.ndarray:
    """Each run's latest evaluation at each grid point (NaN before its first): one row per
    run."""
    lines = []
    for evals in rows_by_run.values():
        xs = np.array([e[axis] for e in evals], dtype=np.float64)
        ys = np.array([e[2] for e in evals], dtype=np.float64)
        index = np.searchsorted(xs, grid, side="right") - 1
        lines.append(np.where(index >= 0, ys[np.clip(index, 0, None)], np.nan))
    return np.array(lines)


def plot(runs: list[Run], out: Path, tasks: dict[str, Task]) -> Path | None:
    """``suite.png``: per task, eval return against training seconds and against steps."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import EngFormatter
    except ImportError:
        print("es-bench suite: matplotlib not installed, no suite.png "
              f"({install_hint('plot')})", file=sys.stderr)
        return None
    evals = {run.name: evaluations(read_progress(run_folder(out, run))) for run in runs}
    names = [name for name in tasks if any(run.task.name == name for run in runs)]
    figure, axes = plt.subplots(len(names), 2, figsize=(11, 3.6 * len(names)), squeeze=False)
    for line, name in enumerate(names):
        for column, (axis, label) in enumerate(((0, "training seconds"), (1, "env steps"))):
            ax = axes[line][column]
            for strategy in dict.fromkeys(r.strategy for r in runs if r.task.name == name):
                seeds = {r.seed: evals[r.name] for r in runs
                         if (r.task.name, r.strategy) == (name, strategy) and evals[r.name]}
                if not seeds:
                    continue
                end = max(e[-1][axis] for e in seeds.values())
                grid = np.linspace(0.0, end, 200)
                values = curves(seeds, axis, grid)
                with warnings.catch_warnings():  # all-NaN columns before the first eval
                    warnings.simplefilter("ignore", RuntimeWarning)
                    q1, median, q3 = np.nanpercentile(values, [25, 50, 75], axis=0)
                plural = "s" if len(seeds) > 1 else ""
                alone = np.isfinite(median).sum() == 1  # one evaluation, at the end: a dot
                ax.plot(grid, median, label=f"{strategy} ({len(seeds)} seed{plural})",
                        marker="o" if alone else None)
                ax.fill_between(grid, q1, q3, alpha=0.25)
            for threshold in tasks[name].thresholds:
                ax.axhline(threshold, color="grey", linewidth=0.8, linestyle=":")
            ax.set_xlabel(label)
            if axis == 1:  # 150k rather than 150000: seven-digit labels ran into each other
                ax.xaxis.set_major_formatter(EngFormatter(sep=""))
            ax.set_ylabel("eval return")
            ax.set_title(f"{name}: median and quartiles over seeds")
            ax.legend(fontsize=8)
    figure.tight_layout()
    path = out / "suite.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def select(suite: Suite, tasks: str | None, strategies: str | None) -> list[Task]:
    if tasks is not None and not tasks.strip(" ,"):  # "" is no task, not every task
        raise ValueError(f"--tasks {tasks!r}: name at least one of {', '.join(suite.tasks)}")
    if strategies is not None and not strategies.strip(" ,"):
        raise ValueError(f"--strategies {strategies!r}: name at least one")
    chosen = list(suite.tasks) if tasks is None else [t.strip() for t in tasks.split(",")]
    unknown = [t for t in chosen if t not in suite.tasks]
    if unknown:
        raise ValueError(f"--tasks {tasks!r}: {unknown[0]!r} is not in the suite (it has "
                         f"{', '.join(suite.tasks)})")
    picked = None if strategies is None else [s.strip() for s in strategies.split(",")]
    selected = []
    for name in chosen:
        task = suite.tasks[name]
        configs = task.configs if picked is None else {
            s: c for s, c in task.configs.items() if s in picked}
        if picked is not None and not configs:
            raise ValueError(f"--strategies {strategies!r}: task {name!r} has configs for "
                             f"{', '.join(task.configs)} only")
        selected.append(Task(task.name, task.thresholds, task.budget_s, task.budget_steps,
                             configs))
    return selected


def suite(args: argparse.Namespace) -> int:
    """``es-bench suite``: run what is not done yet, then write the tables and the plot."""
    import shlex

    suite_file = Path(args.suite)
    spec = load_suite(suite_file)
    tasks = select(spec, args.tasks, args.strategies)
    ranks = args.ranks[0]
    launcher = shlex.split(args.launcher) if args.launcher else [str(BIN / "mpiexec")]
    if not launcher or shutil.which(launcher[0]) is None:  # before the yardstick's minute
        raise ValueError(f"--launcher {args.launcher!r}: {launcher[0] if launcher else ''!r} "
                         "is not a program here")
    out = out_folder(args.out, "suite", suite_file.stem)
    claim_output_folder(out, suite_file)
    runs = [Run(task, strategy, seed) for task in tasks for strategy in task.configs
            for seed in args.seeds]
    check_trained_budgets([*runs, *finished_runs(spec, out)], out, spec, suite_file)
    check_begun_ranks(runs, out, ranks)
    print(f"es-bench suite: {len(runs)} runs ({sum(1 for r in runs if _done(out, r))} done "
          f"already), {args.jobs} at a time on {ranks} rank{'s' * (ranks != 1)} each", flush=True)

    def work(run: Run) -> dict[str, Any]:
        row = execute(run, spec, suite_file, out, ranks, launcher)
        kept = "" if row["kept_mean"] == "" else (
            f", kept {row['kept_mean']:.1f} (worst {row['kept_min']:.1f})")
        print(f"  {run.name}: final {row['final_mean']:.1f} ± {row['final_std']:.1f} "
              f"({row['final_episodes']} episodes){kept}, best eval {row['best_eval']:.1f}, "
              f"{row['train_s']:.0f} s, {row['steps']:,} steps", flush=True)
        return row

    run_all(work, runs, args.jobs, "es-bench suite", out)
    # The tables cover every finished run in the folder of the seeds asked for, this call's and
    # earlier ones' (a long suite is run task by task, over several sessions), so tuning seeds
    # and fresh seeds in one folder give a table each: `--seeds 0-4`, then `--seeds 10-14`.
    asked = set(args.seeds)
    measured = [run for run in finished_runs(spec, out) if run.seed in asked]
    rows = [run_row(run, run_folder(out, run)) for run in measured]
    chosen = {run.task.name: run.task for run in measured}
    write_csv(out / "runs.csv", rows)
    summary = summary_rows(rows, chosen)
    write_csv(out / "summary.csv", summary)
    seeds = sorted({run.seed for run in measured})
    # The ranks the tabled runs trained on, which an earlier call may have chosen.
    trained_on = sorted({began_on(run_folder(out, run)) or ranks for run in measured})
    title = (f"es-bench suite {suite_file.name}: seeds {','.join(map(str, seeds))}, "
             f"mpiexec -n {' and '.join(map(str, trained_on))}, "
             f"final score over {spec.final_episodes} fresh episodes, thresholds judged on "
             f"evaluations of >= {spec.eval_episodes} episodes")
    text = markdown(summary, rows, chosen, title)
    (out / "results.md").write_text(text)
    print("\n" + text)
    plot(measured, out, chosen)
    return 0


def run_suite(args: argparse.Namespace) -> int:
    """``suite`` with Ctrl-C and SIGTERM stopping its trainings cleanly (exit 130)."""
    return run_interruptible(suite, args)


def finished_runs(spec: Suite, out: Path) -> list[Run]:
    """Every run of ``spec`` in ``out`` with its final score, in the suite file's order."""
    runs = []
    for task in spec.tasks.values():
        for strategy in task.configs:
            seeds = finished_seeds(out, f"{task.name}-{strategy}")
            runs += [Run(task, strategy, seed) for seed in seeds]
    return runs


def finished_seeds(out: Path, name: str) -> list[int]:
    """The seeds N of the runs ``out/runs/<name>-seedN`` that have their ``final.json``."""
    prefix = f"{name}-seed"
    return sorted(int(path.parent.name[len(prefix):])
                  for path in (out / "runs").glob(f"{prefix}*/final.json")
                  if path.parent.name[len(prefix):].isdigit())


def _done(out: Path, run: Run) -> bool:
    return (run_folder(out, run) / "final.json").is_file()


def check_trained_budgets(runs: list[Run], out: Path, spec: Suite, suite_file: Path) -> None:
    """The runs begun in ``out`` trained to the budgets the suite file gives now, evaluated on
    its ``eval_episodes`` and scored on its ``final_episodes``: after an edit of the file, a
    finished run would be tabled under the new values and a begun one resumed to its old
    ones. Raises ValueError naming the first that differs."""
    from es.config import load_config

    for run in runs:
        config_file = run_folder(out, run) / "config.toml"
        if not config_file.is_file():
            continue
        trained = load_config(config_file).run
        episodes = run_eval_episodes(spec, suite_file, run.task.configs[run.strategy])
        if trained.eval_episodes != episodes:
            raise ValueError(
                f"{run_folder(out, run)}: evaluated on run.eval_episodes = "
                f"{trained.eval_episodes}, where the suite file now gives {episodes}: use "
                "another --out, or the suite file it was run with")
        final = run_folder(out, run) / "final.json"
        scored = json.loads(final.read_text())["episodes"] if final.is_file() else None
        if scored not in (None, spec.final_episodes):
            raise ValueError(
                f"{run_folder(out, run)}: scored on {scored} final episodes, where the suite "
                f"file now gives final_episodes = {spec.final_episodes}: use another --out, or "
                "the suite file it was run with")
        asked = (run.task.budget_steps, float(run.task.budget_s))
        if (trained.max_timesteps, trained.max_seconds) != asked:
            raise ValueError(
                f"{run_folder(out, run)}: trained to run.max_timesteps = "
                f"{trained.max_timesteps}, run.max_seconds = {trained.max_seconds:g}, where "
                f"the suite file now gives {asked[0]} and {asked[1]:g}: use another --out, "
                "or the suite file it was run with")


def check_begun_ranks(runs: list[Run], out: Path, ranks: int) -> None:
    """A begun run goes on on the ranks it began on: its wall times (to each threshold, of its
    evaluations and confirmations) would otherwise mix two rank counts, though its results
    would not differ. Raises ValueError naming the first that differs."""
    for run in runs:
        run_dir = run_folder(out, run)
        began = began_on(run_dir)
        if (began is not None and began != ranks and (run_dir / "config.toml").is_file()
                and not _done(out, run)):
            raise ValueError(f"--ranks {ranks}: {run.name} began on {began} rank"
                             f"{'s' * (began != 1)} and its times would mix two rank counts: "
                             f"give --ranks {began}, or another --out")


def claim_output_folder(out: Path, suite_file: Path) -> None:
    """Make ``out`` the folder of this suite file's results. Finished runs in it are not
    redone, so one that holds another suite's runs (of the same task and strategy names) is
    refused instead."""
    marker = out / "suite.txt"
    mine = str(suite_file.resolve())
    if marker.is_file() and marker.read_text().strip() != mine:
        raise ValueError(f"--out {str(out)!r} holds the results of the suite "
                         f"{marker.read_text().strip()!r}; pass another --out")
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text(mine + "\n")
