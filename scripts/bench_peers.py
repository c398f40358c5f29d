"""es against a peer library, EvoTorch (Ray), on the same task, settings and cores.

    python scripts/bench_peers.py throughput --evo-python ~/evo/bin/python
    python scripts/bench_peers.py learn --evo-python ~/evo/bin/python --seeds 0-2

The task: HalfCheetah-v5, a linear policy with a bias and observation normalisation, PGPE with
ClipUp, population 64 sampled symmetrically, centered ranks, an initial sigma of 0.05 adapted
per coordinate: es's ``configs/halfcheetah_pgpe.toml`` (as EvoTorch runs PGPE) under
``mpiexec -n RANKS es-train``, and EvoTorch's ``VecGymNE`` (or ``GymNE``) with ``RANKS`` Ray
actors and the same settings (``scripts/peers/evotorch_side.py``, run by ``--evo-python``: EvoTorch
lives in a venv of its own, ``python3 -m venv ~/evo && ~/evo/bin/pip install evotorch
"gymnasium[mujoco]"``, so neither library's dependencies constrain the other's).

``throughput``: pairs of runs back to back, the order alternating, each followed by a bare
loop (RANKS processes stepping HalfCheetah-v5 with a fixed random linear policy): env steps
of the population's episodes per second after ``--warmup-generations`` (start-up left out on
both sides; es's evaluations and kept-policy confirmations are on and not counted as steps,
EvoTorch has none), and the peak memory (RSS summed over every process the run started)
and how many processes it started. ``learn``: each library on each seed for the same env
steps, then its final center policy played by its own library's code (``es-eval``; EvoTorch's
``to_policy``) on the same fresh reset seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from report import BIN, CONFIGS, died, emit, mpiexec, run_or_die, run_script, script_parser

from es.bench.suite import read_progress
from es.cli.args import (
    add_flag,
    add_out,
    add_ranks,
    nonnegative_int,
    parse_seconds,
    positive_int,
)

CONFIG = CONFIGS / "halfcheetah_pgpe.toml"
PEER = Path(__file__).parent / "peers" / "evotorch_side.py"
POPULATION = 64
EPISODE_STEPS = 1000
EVOTORCH_HINT = ('python3 -m venv ~/evo && ~/evo/bin/pip install evotorch "gymnasium[mujoco]", '
                 "then --evo-python ~/evo/bin/python")


class PeakMemory(threading.Thread):
    """The peak of the RSS summed over a process and its descendants (Ray's daemons start
    their own sessions' children, so the session is followed too), sampled twice a second,
    and every process seen."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.seen, self.peak_mb = root, set(), 0.0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            family = self.family()
            self.seen |= family
            self.peak_mb = max(self.peak_mb, sum(rss_mb(pid) for pid in family))
            self.halt.wait(0.5)

    def family(self) -> set[int]:
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                fields = stat[stat.rindex(")") + 2:].split()
                parents[int(entry)] = (int(fields[1]), int(fields[3]))  # parent, session
        family, grew = {self.root}, True
        while grew:
            grown = {pid for pid, (parent, session) in parents.items()
                     if parent in family or session == self.root}
            grew, family = not grown <= family, family | grown
        return family & set(parents)

    def stop(self) -> tuple[float, int]:
        self.halt.set()
        self.join()
        return self.peak_mb, len(self.seen)


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def watched(command: list[str], what: str, env: dict[str, str] | None = None
            ) -> tuple[float, int]:
    """Run ``command`` in a session of its own (its processes are its family); its peak
    memory and processes. A failure ends the script in one line."""
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, env=env,
                                   start_new_session=True)
        memory = PeakMemory(process.pid)
        memory.start()
        code = process.wait()
        peak = memory.stop()
        if code:  # its exception's line, not the log lines Ray prints after it
            errors.seek(0)
            lines = errors.read().strip().splitlines() or ["no output"]
            cause = [line for line in lines if re.match(r"[\w.]*(Error|Exception)\b", line)]
            died(__file__, what, code, (cause or lines)[-1])
    return peak


def window_rate(run_dir: Path, warmup: int) -> float:
    """Env steps per second after generation ``warmup`` (``timesteps``, ``time_s``)."""
    rows = read_progress(run_dir)
    if len(rows) <= warmup + 1:
        sys.exit(f"{Path(__file__).name}: {run_dir / 'progress.csv'}: {len(rows)} "
                 f"generations, too few after a warm-up of {warmup}; give more --timesteps")
    first, last = rows[warmup - 1], rows[-1]
    return ((int(last["timesteps"]) - int(first["timesteps"]))
            / (float(last["time_s"]) - float(first["time_s"])))


def run_es(seed: int, steps: int, ranks: int, run_dir: Path) -> tuple[float, int]:
    return watched(mpiexec(ranks, str(BIN / "es-train"), str(CONFIG), "--run-dir", str(run_dir),
                           "--quiet", "--set", f"run.seed={seed}", "--set",
                           f"run.max_timesteps={steps}"), f"es-train seed {seed}")


def run_evotorch(args: argparse.Namespace, seed: int, steps: int, out_dir: Path,
                 eval_episodes: int = 0) -> tuple[float, int]:
    command = [args.evo_python, str(PEER), "--seed", str(seed), "--actors", str(args.ranks[0]),
               "--max-timesteps", str(steps), "--out-dir", str(out_dir), "--problem",
               args.problem, "--eval-episodes", str(eval_episodes), "--eval-seed",
               str(args.final_seed)]
    return watched(command, f"EvoTorch seed {seed}",
                   env=dict(os.environ, RAY_DISABLE_USAGE_STATS="1"))


def bare_worker(seed: int, seconds: float) -> None:
    """One process stepping HalfCheetah-v5 with a fixed random linear policy; prints its
    steps per second."""
    import gymnasium as gym

    env = gym.make("HalfCheetah-v5")
    weights = np.random.default_rng(seed).standard_normal((6, 17)) * 0.1
    observation, _ = env.reset(seed=seed)
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(100):
            observation, _, terminated, truncated, _ = env.step(
                np.clip(weights @ observation, -1.0, 1.0))
            if terminated or truncated:
                observation, _ = env.reset()
        steps += 100
    print(steps / (time.perf_counter() - started))


def bare_rate(ranks: int, seconds: float) -> float:
    """RANKS bare processes at once: their steps per second, summed."""
    processes = [subprocess.Popen([sys.executable, __file__, "--bare-worker", str(seed),
                                   "--bare-seconds", str(seconds)], stdout=subprocess.PIPE,
                                  text=True) for seed in range(ranks)]
    return sum(float(process.communicate()[0]) for process in processes)


def throughput_rows(args: argparse.Namespace) -> list[dict]:
    ranks = args.ranks[0]
    steps = (args.warmup_generations + 1) * POPULATION * EPISODE_STEPS + args.timesteps
    rows = []
    for pair in range(args.pairs):
        order = ("es", "evotorch") if pair % 2 == 0 else ("evotorch", "es")
        measured = {}
        for library in order:
            with tempfile.TemporaryDirectory() as tmp:
                run_dir = Path(tmp) / "run"
                memory = (run_es(args.seed, steps, ranks, run_dir) if library == "es" else
                          run_evotorch(args, args.seed, steps, run_dir))
                measured[library] = (window_rate(run_dir,
                                                 args.warmup_generations), *memory)
        bare = bare_rate(ranks, args.bare_seconds)
        for library in ("es", "evotorch"):
            rate, peak_mb, processes = measured[library]
            rows.append({"pair": pair, "order": " then ".join(order), "library": library,
                         "steps_per_s": rate, "bare_steps_per_s": bare, "vs_bare": rate / bare,
                         "es_over_evotorch": measured["es"][0] / measured["evotorch"][0],
                         "peak_rss_mb": peak_mb, "processes": processes})
        print(f"pair {pair}: es {measured['es'][0]:.0f}, EvoTorch {measured['evotorch'][0]:.0f}, "
              f"bare {bare:.0f} steps/s", flush=True)
    return rows


def learn_rows(args: argparse.Namespace) -> list[dict]:
    ranks = args.ranks[0]
    rows = []
    for index, seed in enumerate(args.seeds):
        for library in ("es", "evotorch") if index % 2 == 0 else ("evotorch", "es"):
            with tempfile.TemporaryDirectory() as tmp:
                run_dir = Path(tmp) / "run"
                started = time.perf_counter()
                if library == "es":
                    peak_mb, _ = run_es(seed, args.timesteps, ranks, run_dir)
                    wall = time.perf_counter() - started
                    run_or_die(__file__, "es-eval", [
                        str(BIN / "es-eval"), str(run_dir), "--episodes",
                        str(args.final_episodes), "--seed", str(args.final_seed), "--json",
                        str(run_dir / "eval.json")])
                else:
                    peak_mb, _ = run_evotorch(args, seed, args.timesteps, run_dir,
                                              args.final_episodes)
                    wall = time.perf_counter() - started
                returns = np.array(json.loads((run_dir / "eval.json").read_text())["returns"])
                progress = read_progress(run_dir)
            rows.append({"seed": seed, "library": library, "steps": int(progress[-1]["timesteps"]),
                         "generations": len(progress), "wall_s": wall,
                         "final_mean": float(returns.mean()), "final_worst": float(returns.min()),
                         "peak_rss_mb": peak_mb})
            print(f"seed {seed} {library}: {returns.mean():.0f} (worst {returns.min():.0f}) "
                  f"in {wall:.0f} s", flush=True)
    return rows


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/bench_peers.py throughput --evo-python ~/evo/bin/python",
        "python scripts/bench_peers.py learn --evo-python ~/evo/bin/python --seeds 0-2"])
    parse.add_argument("what", choices=("throughput", "learn"))
    parse.add_argument("--evo-python", metavar="PATH", required=True,
                       help="the python of a venv with EvoTorch: " + EVOTORCH_HINT)
    parse.add_argument("--problem", choices=("vecgymne", "gymne"), default="vecgymne",
                       help="EvoTorch's problem class (default: vecgymne, its faster one)")
    add_ranks(parse, "2", several=False, detail="es's ranks, EvoTorch's actors")
    add_flag(parse, "--seed", "throughput's runs", default=0)
    add_flag(parse, "--seeds", "learn's runs", default=[0, 1, 2])
    parse.add_argument("--timesteps", type=positive_int, metavar="N",
                       help="env steps: learn's budget (default: 2,560,000), throughput's "
                       "timed window (default: 1,024,000)")
    parse.add_argument("--pairs", type=positive_int, default=3, metavar="N",
                       help="throughput: A/B pairs (default: 3)")
    parse.add_argument("--warmup-generations", type=positive_int, default=2, metavar="N",
                       help="throughput: generations left out of the rate (default: 2)")
    parse.add_argument("--bare-seconds", type=parse_seconds, default=20.0, metavar="SECONDS",
                       help="throughput: the bare loop's seconds (default: 20)")
    parse.add_argument("--final-episodes", type=positive_int, default=10, metavar="N",
                       help="learn: episodes of each final policy (default: 10)")
    parse.add_argument("--final-seed", type=nonnegative_int, default=10_000, metavar="N",
                       help="learn: reset seed of the first (default: 10000)")
    add_out(parse, "bench_peers")
    return parse


def main() -> None:
    if sys.argv[1:2] == ["--bare-worker"]:
        bare_worker(int(sys.argv[2]), float(sys.argv[4]))
        return
    parse = parser()
    args = parse.parse_args()
    found = subprocess.run([args.evo_python, "-c", "import evotorch, ray, gymnasium, mujoco"],
                           capture_output=True, text=True) if Path(
                               args.evo_python).is_file() else None
    if found is None or found.returncode:
        parse.error(f"--evo-python {args.evo_python}: not a python that imports evotorch, ray, "
                    f"gymnasium and mujoco; make one: {EVOTORCH_HINT}")
    if args.what == "throughput":
        args.timesteps = args.timesteps or 1_024_000
        emit(throughput_rows(args), args.out, "es against EvoTorch: env steps/s, HalfCheetah-v5 "
             f"PGPE, {args.ranks[0]} ranks / actors")
    else:
        args.timesteps = args.timesteps or 2_560_000
        emit(learn_rows(args), args.out, f"es against EvoTorch: final policies after "
             f"{args.timesteps:,} env steps, HalfCheetah-v5 PGPE")


if __name__ == "__main__":
    run_script(main)
