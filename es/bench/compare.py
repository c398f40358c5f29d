"""``es-compare``: ES against the baselines on one env, equal wall-clock budgets, same seeds.

    es-compare --env CartPole-v1 --budget-s 120 --seeds 0-2
    es-compare --env Pendulum-v1 --budget-s 120 --seeds 0-2    # continuous: no DQN

Every (method, seed) is a real ``es-train`` / ``es-baseline`` run in its own folder under
``--out`` (default ``bench-results/compare``), with ``run.max_seconds`` = the budget, counted
from process start, so start-up costs count too. Afterwards every run's final ``policy.npz``
plays the same ``--eval-episodes`` seeded episodes. Written: ``compare.csv`` (one row per run),
``compare.md`` (per method: final eval return mean ± std over seeds, how many seeds reached the
threshold, median env steps and wall seconds to it, per seed the share of the second half's
evaluations at or above it: stays solved or touched it once, bytes communicated per update) and
``compare.png`` (eval return against wall time on a log axis, mean ± std over seeds).
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from es.bench.report import check_out, mark_out, out_folder
from es.config import locate_config, shipped_config

METHODS = ("es", "pg", "ppo", "dqn")
#: Methods whose runs use --ranks ranks (DQN is one process by design).
DISTRIBUTED = ("es", "pg", "ppo")
#: The shipped configs each method starts from (es.config.shipped_config, whatever the folder
#: es-compare runs in); other envs get these with env.id replaced.
DEFAULT_CONFIGS = {
    "CartPole-v1": {"es": "configs/cartpole.toml", "pg": "configs/baselines/cartpole_pg.toml",
                    "ppo": "configs/baselines/cartpole_ppo.toml",
                    "dqn": "configs/baselines/cartpole_dqn.toml"},
    "Pendulum-v1": {"es": "configs/pendulum.toml", "pg": "configs/baselines/pendulum_pg.toml",
                    "ppo": "configs/baselines/pendulum_ppo.toml"},
    "HalfCheetah-v5": {"es": "configs/halfcheetah_ars.toml",
                       "ppo": "configs/baselines/halfcheetah_ppo.toml"},
}
#: The usual "solved" scores (Gymnasium's reward_threshold where it has one; HalfCheetah: the
#: one ARS (Mania et al. 2018) and es-bench suite use).
THRESHOLDS = {"CartPole-v1": 475.0, "Pendulum-v1": -200.0, "HalfCheetah-v5": 3430.0}


@dataclass
class RunSummary:
    method: str
    seed: int
    run_dir: str
    final_mean: float
    final_std: float
    timesteps: int
    rounds: int
    steps_to_threshold: float  # nan: not reached
    seconds_to_threshold: float
    held: float  # share of the second half's evaluations at or above the threshold
    bytes_per_update: float


def is_discrete(env_id: str) -> bool:
    import gymnasium as gym

    from es.rl.envs import make_env

    env = make_env(env_id, None, {})
    return isinstance(env.action_space, gym.spaces.Discrete)


def config_for(method: str, env_id: str, discrete: bool, given: dict[str, str]) -> tuple[str,
                                                                                        list[str]]:
    """(config path, extra overrides) of one method on ``env_id``: a given config trains on
    ``--env`` whatever env its file names, as the shipped template of another env does."""
    if method in given:
        return given[method], [f"env.id={env_id}"]
    if env_id in DEFAULT_CONFIGS and method in DEFAULT_CONFIGS[env_id]:
        return str(shipped_config(DEFAULT_CONFIGS[env_id][method])), []
    template = DEFAULT_CONFIGS["CartPole-v1" if discrete else "Pendulum-v1"][method]
    return str(shipped_config(template)), [f"env.id={env_id}"]


def executable(name: str) -> str:
    """A console script of this installation (beside the running Python), else from PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def run_overrides(method: str, overrides: list[str], seed: int, budget_s: float) -> list[str]:
    """The ``--set`` values of one run: the method's own, then the comparison's budget."""
    return [*overrides, f"run.name={method}", f"run.seed={seed}", f"run.max_seconds={budget_s}",
            "run.generations=1000000000", "run.max_timesteps=0"]


def command(method: str, config: str, overrides: list[str], run_dir: Path, seed: int,
            budget_s: float, ranks: int) -> list[str]:
    """The command line of one run, as a user would type it."""
    program = [executable("es-train")] if method == "es" else [executable("es-baseline"), method]
    line = [*program, config, "--run-dir", str(run_dir), "--force", "--quiet"]
    for value in run_overrides(method, overrides, seed, budget_s):
        line += ["--set", value]
    if ranks > 1 and method in DISTRIBUTED:
        line = [executable("mpiexec"), "-n", str(ranks), *line]
    return line


def summarise(method: str, seed: int, run_dir: Path, threshold: float | None,
              episodes: int) -> RunSummary:
    from es.config import load_config
    from es.rl.checkpoint import load_policy
    from es.rl.envs import env_from_config
    from es.rl.rollout import run_episode

    with (run_dir / "progress.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    policy = load_policy(run_dir / "policy.npz")
    env = env_from_config(load_config(run_dir / "config.toml"))
    returns = np.array([run_episode(env, policy.act(env), 10_000 + i).total_return
                        for i in range(episodes)])
    evals = [(float(r["time_s"]), float(r["eval_return"])) for r in rows if r["eval_return"]]
    reached = [r for r in rows if threshold is not None and r["eval_return"]
               and float(r["eval_return"]) >= threshold]
    first = reached[0] if reached else None
    sent = [float(r["bytes_sent"]) for r in rows if r["bytes_sent"]]
    return RunSummary(
        method, seed, str(run_dir), float(returns.mean()), float(returns.std()),
        int(rows[-1]["timesteps"]) if rows else 0, len(rows),
        float(first["timesteps"]) if first else float("nan"),
        float(first["time_s"]) if first else float("nan"),
        held_share(evals, threshold),
        float(np.median(sent)) if sent else 0.0,
    )


def held_share(evals: list[tuple[float, float]], threshold: float | None) -> float:
    """The share of the evaluations (training seconds, return) in the run's second half (by
    time) at or above ``threshold``: does the method stay solved, or touch it once? NaN
    without a threshold or evaluations there."""
    if threshold is None or not evals:
        return float("nan")
    half = evals[-1][0] / 2
    late = [value for seconds, value in evals if seconds >= half]
    return sum(value >= threshold for value in late) / len(late)


def _fmt(value: float, digits: int = 0) -> str:
    return "—" if np.isnan(value) else f"{value:,.{digits}f}"


def _percent(share: float) -> str:
    return "—" if np.isnan(share) else f"{100 * share:.0f}%"


def markdown_table(summaries: list[RunSummary], threshold: float | None,
                   budget_s: float) -> str:
    """One line per method, the seeds aggregated."""
    goal = f"≥ {threshold:g}" if threshold is not None else "(no threshold)"
    lines = [
        f"| method | final eval return (mean ± std over seeds) | seeds reaching {goal} | "
        "env steps to it (median) | wall s to it (median) | second half's evals at it "
        "(per seed) | bytes per update |",
        "|---|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        runs = [s for s in summaries if s.method == method]
        if not runs:
            continue
        finals = np.array([s.final_mean for s in runs])
        steps = np.array([s.steps_to_threshold for s in runs])
        seconds = np.array([s.seconds_to_threshold for s in runs])
        hit = ~np.isnan(steps)
        reaching = "—" if threshold is None else f"{hit.sum()}/{len(runs)}"
        lines.append(
            f"| {method} | {finals.mean():.1f} ± {finals.std():.1f} | {reaching} | "
            f"{_fmt(np.median(steps[hit]) if hit.any() else np.nan)} | "
            f"{_fmt(np.median(seconds[hit]) if hit.any() else np.nan, 1)} | "
            f"{' / '.join(_percent(s.held) for s in runs)} | "
            f"{_fmt(float(np.median([s.bytes_per_update for s in runs])))} |")
    lines.append(f"\nBudget {budget_s:g} s of wall time per run; final eval: the last saved "
                 "policy on the same seeded episodes for every run.")
    return "\n".join(lines) + "\n"


def check_policy_fits_env(method: str, config: Any) -> None:
    """The policy of ``method``'s config built for its env, as its run builds them first (a
    user's policy also probed, as es-train probes it): a CNN for a vector observation, or a
    user's policy acting outside the action space, failed every run of the method, each after
    its start."""
    from es.baselines.common import network_spec
    from es.rl.envs import env_from_config
    from es.rl.policy import UserPolicy, make_policy

    env = env_from_config(config)
    try:
        if method == "es":
            policy = make_policy(config, env)
            if isinstance(policy, UserPolicy):
                policy.probe(env, policy.initial_params(np.random.default_rng(0)))
            config.es.check_table_holds(policy.num_params)
        else:
            network_spec(config, env, f"es-baseline {method}")
    finally:
        env.close()


def compare(args: argparse.Namespace) -> int:
    """``es-compare`` with its parsed flags: the runs, then ``compare.csv``, ``compare.md`` and
    ``compare.png`` in the output folder. A bad flag value is a one-line ValueError, raised
    before any run starts; exit code 1 when a run failed (the table holds the others)."""
    from es.baselines.ppo import check_ranks
    from es.config import ConfigError, load_config
    from es.rl.envs import check_env_id
    from es.rl.policies import PolicyError
    from es.rl.policy import import_object, is_factory

    check_env_id(args.env)
    named = args.methods is not None  # distinct, among METHODS: es.cli.args.name_list
    methods = list(args.methods) if named else list(METHODS)
    given = {}
    for text in args.method_config:
        method, sep, path = text.partition("=")
        if not sep or method not in METHODS:
            raise ValueError(f"--method-config {text!r}: expected METHOD=PATH with METHOD in "
                             f"{', '.join(METHODS)}")
        if method not in methods:  # else set aside without a word
            raise ValueError(f"--method-config {text!r}: {method} is not among --methods "
                             f"({','.join(methods)})")
        if method in given:  # the last would win without a word
            raise ValueError(f"--method-config {text!r}: {method} has one already "
                             f"({given[method]}); give each method one")
        given[method] = str(locate_config(path))
    discrete = is_discrete(args.env)
    if "dqn" in methods and not discrete and named:  # asked for: not dropped without a word
        raise ValueError(f"--methods {','.join(methods)}: {args.env} has continuous actions, "
                         "DQN needs discrete ones; leave dqn out")
    if "dqn" in methods and not discrete:
        print(f"es-compare: {args.env} has continuous actions: DQN left out", file=sys.stderr)
        methods.remove("dqn")
    threshold = args.threshold if args.threshold is not None else THRESHOLDS.get(args.env)
    out = out_folder(args.out, "compare", args.env.replace("/", "_"))
    ranks = args.ranks[0]
    jobs = []
    for method in methods:
        config, overrides = config_for(method, args.env, discrete, given)
        try:  # now, not when the runs before it have spent their budgets
            loaded = load_config(config, run_overrides(method, overrides, 0, args.budget_s))
            if method == "ppo":
                check_ranks(loaded, ranks)
                if loaded.ppo.anneal_lr:  # it would fail every run, each after its start
                    raise ValueError("ppo.anneal_lr = true anneals over run.max_timesteps, which "
                                     "es-compare's runs leave 0 (--budget-s ends them); set "
                                     "ppo.anneal_lr = false")
            if method == "es" and is_factory(loaded.policy.kind):  # its module imports
                import_object(loaded.policy.kind, "policy.kind")
            check_policy_fits_env(method, loaded)
        except (ConfigError, PolicyError, ValueError) as error:
            raise ValueError(f"config {config!r} of {method}: {error}") from None
        for seed in args.seeds:
            run_dir = out / method / f"seed{seed}"
            jobs.append((method, seed, run_dir, command(method, config, overrides, run_dir, seed,
                                                        args.budget_s, ranks)))
    missing = sorted({job[3][0] for job in jobs if shutil.which(job[3][0]) is None})
    if missing:
        raise ValueError(f"{', '.join(missing)}: not found; install the package (pip install -e .)")
    if (out / "config.toml").is_file():  # its files would sit among a run's
        raise ValueError(f"--out {str(out)!r}: holds a run (its config.toml), not a "
                         "comparison; give another folder")
    check_out(out, "es-compare")  # an es-bench command's or a script's: --force or not
    earlier = earlier_comparison(out)
    if earlier and not args.force:
        raise ValueError(f"--out {str(out)!r} holds an earlier comparison "
                         f"({', '.join(earlier[:4])}{', ...' if len(earlier) > 4 else ''}): "
                         "pass --force to replace it, or another --out")
    for path in earlier:  # all of it: its other seeds and methods joined the new table's plot
        (shutil.rmtree if (out / path).is_dir() else Path.unlink)(out / path)
    out.mkdir(parents=True, exist_ok=True)

    # The runs are process groups of their own, so every stop comes through here once: a
    # terminal's Ctrl-C, a SIGINT or SIGTERM to this process alone (kill, timeout, a
    # scheduler, a notebook), which the runs had not seen, going on to the end of their
    # budgets, or the terminal's hangup. Each is passed on as the SIGTERM that stops a run at
    # its checkpoint (a second stops it at once, as a second Ctrl-C does), and no run not yet
    # started starts. The handler takes no lock (a second signal inside it would wait on
    # itself): list.append, set.add and list(set) are atomic under the GIL.
    signals: list[int] = []
    running: set[subprocess.Popen] = set()
    warned: set[tuple[str, str]] = set()  # each method's warnings said once, not per seed

    def stop(signum: int, frame: object) -> None:
        signals.append(signum)
        for process in list(running):
            process.send_signal(signal.SIGTERM)

    previous = {signum: signal.signal(signum, stop)
                for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def launch(job) -> tuple[str, int, Path, int | None]:
        method, seed, run_dir, line = job
        if signals:
            return method, seed, run_dir, None
        sys.stdout.write(f"es-compare: {method} seed {seed}: {shlex.join(line)}\n")  # one write:
        sys.stdout.flush()  # lines of jobs started side by side do not interleave
        with (out / f"{method}-seed{seed}.log").open("w") as log_file:
            process = subprocess.Popen(line, stdin=subprocess.DEVNULL, stdout=log_file,
                                       stderr=subprocess.STDOUT, process_group=0,
                                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
        running.add(process)
        if signals:  # the signal came between the check above and here
            process.send_signal(signal.SIGTERM)
        code = process.wait()
        running.discard(process)
        # What a run warned of (a --method-config's settings it ignores) was in its log only.
        log = (out / f"{method}-seed{seed}.log").read_text(errors="replace")
        for line in log.splitlines():
            if ": warning: " in line and (method, line) not in warned:
                warned.add((method, line))
                sys.stderr.write(f"es-compare: {method} seed {seed}: {line}\n")
        sys.stderr.flush()
        return method, seed, run_dir, code

    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            finished = list(pool.map(launch, jobs))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    ended = [job for job in finished if job[3] == 0]  # the others' rows would be empty or cut
    if signals:
        skipped = sum(code is None for *_, code in finished)
        if ended:  # whole budgets, and so a fair table of its own
            write_comparison(ended, out, threshold, args)
        print(f"es-compare: interrupted: {len(finished) - skipped} of the runs stopped or "
              f"ended, {skipped} not started; their logs are in {out}"
              + (f"; the table holds the {len(ended)} that had ended" if ended else ""),
              file=sys.stderr)
        return 130
    failed = [f"{m} seed {s} (exit {c}, see {out / f'{m}-seed{s}.log'})"
              for m, s, _, c in finished if c != 0]
    if ended:
        write_comparison(ended, out, threshold, args)
    if failed:
        print(f"es-compare: error: runs failed: {'; '.join(failed)}"
              + ("; the table holds the others" if finished else ""), file=sys.stderr)
        return 1
    return 0


def earlier_comparison(out: Path) -> list[str]:
    """What an earlier es-compare left in ``out``, as paths in it: its methods' folders (with
    a run), its tables and its runs' logs."""
    if not out.is_dir():
        return []
    folders = [method for method in METHODS
               if any((out / method).glob("seed*/progress.csv"))]
    files = [path.name for path in sorted(out.iterdir()) if path.is_file() and (
        path.name in ("compare.csv", "compare.md", "compare.png")
        or (path.suffix == ".log" and path.stem.split("-seed")[0] in METHODS))]
    return folders + files


def write_comparison(finished: list[tuple[str, int, Path, int | None]], out: Path,
                     threshold: float | None, args: argparse.Namespace) -> None:
    """``compare.csv``, ``compare.md`` and ``compare.png`` of the runs that ended well."""
    summaries = [summarise(m, s, d, threshold, args.eval_episodes) for m, s, d, _ in finished]
    with (out / "compare.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(summaries[0])))
        writer.writeheader()
        writer.writerows(asdict(s) for s in summaries)
    mark_out(out, "es-compare")
    table = markdown_table(summaries, threshold, args.budget_s)
    (out / "compare.md").write_text(f"## {args.env}\n\n{table}")
    print(table)
    from es.bench.curves import plot

    methods = list(dict.fromkeys(m for m, *_ in finished))
    try:  # each method's seeds are one config: one curve per method
        plot([d for _, _, d, _ in finished], out / "compare.png", "time_s", "eval_return",
             f"{args.env}: {', '.join(methods)}, {len(args.seeds)} "
             f"seed{'s' if len(args.seeds) != 1 else ''}, {args.budget_s:g} s each",
             log_x=True)
        print(f"wrote {out / 'compare.csv'}, {out / 'compare.md'}, {out / 'compare.png'}")
    except (RuntimeError, ValueError) as error:  # no matplotlib, a run without evaluations:
        print(f"wrote {out / 'compare.csv'}, {out / 'compare.md'}")  # the table stands
        print(f"es-compare: no plot: {error}", file=sys.stderr)
