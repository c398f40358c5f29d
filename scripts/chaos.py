"""Chaos test of exact resume: kill a random rank at a random moment, resume, many times;
or, with ``--hosts H``, make random hosts of an elastic run gone, killed or hung.

    python scripts/chaos.py --config configs/halfcheetah.toml --cycles 20 --generations 80
    python scripts/chaos.py --config configs/hopper.toml --set run.schedule=dynamic --cycles 20
    python scripts/chaos.py --hosts 3 --faults gone,kill,stop --cycles 20 --generations 200 \
        --config configs/cartpole.toml --set env.id=es/Sleep-v0 --set env.kwargs.step_ms=1

First an uninterrupted run of the config (on a random rank count) gives the reference result
and the run's pace: when its config.toml and each checkpoint appeared. Then each cycle launches
the run on 1-3 ranks (1: plain ``es-train`` or ``mpiexec -n 1``), as a user would: the
original command while the run folder holds no config.toml (``--force`` if the folder is not
empty), else ``es-train --resume``. It SIGKILLs one random rank at a moment drawn uniformly
from the launch to the reference's K-th checkpoint, so kills land before the run folder
exists, before the first checkpoint and between checkpoints (``--forced`` makes the first
cycles such kills), and waits for the job to end: a job still running ``--hang-s`` seconds
after the kill is a hang, a failed cycle, and so are ranks left behind. After the cycles one
resume without kills finishes the run; its policy.npz, final checkpoint and progress.csv rows
must be bit-identical to the reference's. The budget is run.generations (run.max_seconds is
set to 0: wall time is not deterministic).

"Generations redone" counts generations a session computed (printed) that an earlier session
had computed already: the work the kills threw away. Exit 1 if a cycle failed or anything
differs.

With ``--hosts H`` (root: network-namespaced hosts, ``es.parallel.fake_cluster``) there is one
``es-train --elastic`` run over a hostfile of H hosts instead, and each cycle is one fault on a
random host running ranks, of a random kind from ``--faults``; the run goes on by itself and
must end bit-identical to the uninterrupted reference.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from report import BIN, RESULTS_CSV, check_config, emit, mpiexec, run_script, script_parser

from es.cli.args import add_flag, add_out, nonnegative_int, parse_seconds, positive_int
from es.launch.elastic import last_progress_generation
from es.parallel.comm import outside_the_job
from es.parallel.fake_cluster import FakeCluster
from es.rl.checkpoint import CheckpointError, load_latest_checkpoint

GENERATION_LINE = re.compile(r"^gen\s+(\d+) \|", re.MULTILINE)
STABLE_COLUMNS = ("generation", "timesteps", "return_mean", "return_min", "return_max",
                  "eval_return", "episodes", "failed_episodes")
POLL_S = 0.005
PHASES = ("pre-config", "pre-checkpoint", "any")


@dataclass
class Kill:
    """When to SIGKILL which rank: ``at`` seconds after launch. With ``guard`` (a generation
    before the session's first checkpoint), not before config.toml exists and at the latest
    as soon as the session printed that generation (at once if the session starts there:
    checkpoints every generation)."""

    rank: int
    at: float
    guard: int | None = None
    start: int = 0
    by_config: bool = False  # at the latest when config.toml appears


@dataclass
class Session:
    code: int | None = None
    wall_s: float = 0.0
    killed_at: float | None = None
    hang: bool = False
    strays: list[int] = field(default_factory=list)
    config_at: float | None = None
    checkpoint_at: dict[int, float] = field(default_factory=dict)
    generations: list[int] = field(default_factory=list)
    stderr: str = ""


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _es_train_argv(pid: int) -> list[bytes] | None:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return argv if len(argv) > 1 and argv[1].endswith(b"es-train") else None


def rank_pids(root: int) -> dict[int, int]:
    """rank -> pid of the es-train processes started by ``root`` (itself included); the rank
    is the launcher's PMI_RANK, 0 without a launcher."""
    tree, todo, ranks = _children(), [root], {}
    while todo:
        pid = todo.pop()
        todo += tree.get(pid, [])
        if _es_train_argv(pid) is None:
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        rank = next((int(v[9:]) for v in environ if v.startswith(b"PMI_RANK=")), 0)
        ranks[rank] = pid
    return ranks


def stray_ranks(run_dir: Path) -> list[int]:
    """es-train processes of this run still alive (after their job ended: a leak)."""
    pids = []
    for entry in Path("/proc").iterdir():
        argv = _es_train_argv(int(entry.name)) if entry.name.isdigit() else None
        if argv and str(run_dir).encode() in argv:
            pids.append(int(entry.name))
    return pids


def printed_generations(path: Path) -> list[int]:
    return [int(g) for g in GENERATION_LINE.findall(path.read_text())] if path.exists() else []


def newest_checkpoint(run_dir: Path) -> int:
    """Generation of the newest intact checkpoint, 0 if none; raises CheckpointError if
    checkpoints exist and none is intact."""
    if not any((run_dir / "checkpoints").glob("ckpt-*.json")):
        return 0
    return load_latest_checkpoint(run_dir / "checkpoints")[0].generation


def run_session(train_args: list[str], ranks: int, plain: bool, run_dir: Path, logs: Path,
                kill: Kill | None, hang_s: float, timeout_s: float) -> Session:
    """Launch es-train, watch the run folder, kill as planned; stdout/stderr go to logs."""
    command = [str(BIN / "es-train"), *train_args]
    if not plain:
        command = mpiexec(ranks, *command)
    env = outside_the_job(os.environ)
    out, err = logs.with_suffix(".out"), logs.with_suffix(".err")
    session = Session()
    with out.open("w") as stdout, err.open("w") as stderr:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env,
                                   start_new_session=True)
        deadline = started + timeout_s
        while process.poll() is None and time.monotonic() < deadline:
            now = time.monotonic() - started
            if session.config_at is None and (run_dir / "config.toml").exists():
                session.config_at = now
            for path in (run_dir / "checkpoints").glob("ckpt-*.json"):
                session.checkpoint_at.setdefault(int(path.stem[5:]), now)
            if kill is not None and session.killed_at is None and _kill_due(kill, now,
                                                                           session, out):
                pid = rank_pids(process.pid).get(kill.rank)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    session.killed_at = now
                    deadline = min(deadline, time.monotonic() + hang_s)
            time.sleep(POLL_S)
        if process.poll() is None:
            session.hang = True
            os.killpg(process.pid, signal.SIGKILL)  # the job's own process group
        session.code = process.wait()
        session.wall_s = time.monotonic() - started
    time.sleep(0.2)  # the launcher's last children go down
    session.strays = stray_ranks(run_dir)
    for pid in session.strays:
        os.kill(pid, signal.SIGKILL)
    session.generations = printed_generations(out)
    session.stderr = err.read_text()
    return session


def _kill_due(kill: Kill, now: float, session: Session, out: Path) -> bool:
    if kill.guard is None:
        return now >= kill.at or (kill.by_config and session.config_at is not None)
    if session.config_at is None:
        return False
    if now >= kill.at or kill.guard <= kill.start:
        return True
    printed = printed_generations(out)
    return bool(printed) and printed[-1] >= kill.guard


def compare(reference: Path, run: Path) -> list[str]:
    """What differs bit for bit between two finished runs (empty: nothing)."""
    differ = []
    with np.load(reference / "policy.npz", allow_pickle=False) as a, \
            np.load(run / "policy.npz", allow_pickle=False) as b:
        for key in sorted(set(a.files) | set(b.files)):
            if key not in a.files or key not in b.files or not _same(a[key], b[key]):
                differ.append(f"policy.npz {key}")
    ra, rb = (load_latest_checkpoint(r / "checkpoints")[0] for r in (reference, run))
    for name in ("generation", "timesteps", "obs_count", "mean_episode_length"):
        if getattr(ra, name) != getattr(rb, name):
            differ.append(f"checkpoint {name} ({getattr(ra, name)} vs {getattr(rb, name)})")
    for name in ("obs_sum", "obs_sumsq"):
        if not _same(getattr(ra, name), getattr(rb, name)):
            differ.append(f"checkpoint {name}")
    for key in sorted(set(ra.strategy) | set(rb.strategy)):  # theta, optimizer moments, ...
        if key not in ra.strategy or key not in rb.strategy or not _same(
                np.asarray(ra.strategy[key]), np.asarray(rb.strategy[key])):
            differ.append(f"checkpoint strategy {key}")
    rows_a, rows_b = (_stable_rows(r) for r in (reference, run))
    if rows_a != rows_b:
        pairs = zip(rows_a, rows_b, strict=False)
        bad = next((i for i, (x, y) in enumerate(pairs) if x != y), min(len(rows_a), len(rows_b)))
        differ.append(f"progress.csv rows ({len(rows_a)} vs {len(rows_b)}, first difference "
                      f"at row {bad + 1})")
    return differ


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _stable_rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "progress.csv").open(newline="") as handle:
        return [{k: row[k] for k in STABLE_COLUMNS} for row in csv.DictReader(handle)]


def draw_launch(rng: np.random.Generator) -> tuple[int, bool]:
    """(ranks, plain): 1-3 ranks; 1 rank is plain es-train or mpiexec -n 1."""
    ranks = int(rng.integers(1, 4))
    return ranks, ranks == 1 and bool(rng.integers(2))


def launcher(ranks: int, plain: bool) -> str:
    return "es-train" if plain else f"mpiexec -n {ranks}"


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/chaos.py --config configs/halfcheetah.toml --cycles 20 "
        "--generations 80",
        "python scripts/chaos.py --config configs/hopper.toml --set run.schedule=dynamic "
        "--cycles 20"])
    add_flag(parse, "--config", "the run to kill and resume", required=True)
    parse.add_argument("--cycles", type=positive_int, default=20)
    add_flag(parse, "--generations", "the budget: wall time is not deterministic", default=60)
    add_flag(parse, "--seed", "run.seed", default=0)
    add_flag(parse, "--set", "more config overrides")
    parse.add_argument("--checkpoint-every", type=positive_int, default=3,
                       help="run.checkpoint_every")
    parse.add_argument("--chaos-seed", type=nonnegative_int, default=0,
                       help="seeds the draws: rank counts, killed ranks, kill moments")
    parse.add_argument("--window-checkpoints", type=positive_int, default=3,
                       help="kill moments are uniform from launch to the reference run's "
                       "K-th checkpoint (default 3)")
    parse.add_argument("--forced", default="pre-checkpoint",
                       help="comma-separated kinds of kill for the first cycles: pre-config "
                       "(early in start-up), pre-checkpoint (after config.toml, before the "
                       "session's first checkpoint), any (default: pre-checkpoint)")
    parse.add_argument("--hang-s", type=parse_seconds, default=30.0,
                       help="a job still running this long after the kill is a hang")
    parse.add_argument("--timeout-s", type=parse_seconds, default=3600.0,
                       help="limit for the uninterrupted runs (a hang, not a budget)")
    add_flag(parse, "--hosts", "host-level chaos: one elastic run on them")
    parse.add_argument("--faults", default="gone,kill,stop",
                       help="with --hosts: the kinds of fault drawn, from gone (a dead "
                       "machine), kill (its ranks killed), stop (its ranks hung by SIGSTOP)")
    add_flag(parse, "--ranks-per-host", "with --hosts", default=2)
    add_out(parse, "chaos", f"the runs, their logs and {RESULTS_CSV}; a previous chaos test's "
            "runs and logs in it are deleted first")
    return parse


def main() -> int:
    parse = parser()
    args = parse.parse_args()
    forced = [p for p in args.forced.split(",") if p]
    if any(p not in PHASES for p in forced):
        parse.error(f"--forced {args.forced!r}: kinds are {', '.join(PHASES)}")
    if any(o.split("=", 1)[0].strip() == "run.max_seconds" for o in args.overrides):
        parse.error("run.max_seconds is not deterministic: the budget is --generations")
    check_config(parse, args.config, args.overrides)
    if any(f not in FAULTS for f in args.faults.split(",") if f) \
            or not args.faults.strip(","):
        parse.error(f"--faults {args.faults!r}: kinds are {', '.join(FAULTS)}")

    out = args.out.resolve()
    reference_dir, run_dir = out / "reference", out / "chaos"
    for stale in (reference_dir, run_dir, out / "logs"):  # es-train would refuse a used folder
        shutil.rmtree(stale, ignore_errors=True)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    settings = [*args.overrides, f"run.generations={args.generations}", f"run.seed={args.seed}",
                f"run.checkpoint_every={args.checkpoint_every}", "run.max_seconds=0"]
    if args.hosts:  # a silent host is found within 5 s unless --set says otherwise
        settings.insert(0, "run.peer_timeout_s=5")
    sets = [flag for s in settings for flag in ("--set", s)]
    if args.hosts:
        return run_host_chaos(args, sets, reference_dir, run_dir, out / "logs", compare)
    rng = np.random.default_rng(args.chaos_seed)

    ranks, plain = draw_launch(rng)
    print(f"reference: {launcher(ranks, plain)} es-train {args.config} ... "
          f"({args.generations} generations, uninterrupted)", flush=True)
    reference = run_session([args.config, *sets, "--run-dir", str(reference_dir)], ranks, plain,
                            reference_dir, out / "logs/reference", None, args.hang_s,
                            args.timeout_s)
    if reference.code != 0:
        print(f"the reference run failed (exit {reference.code}):\n{reference.stderr}")
        return 1
    config_at = reference.config_at or 0.0
    marks = [reference.checkpoint_at[g] for g in sorted(reference.checkpoint_at)]
    window = marks[min(args.window_checkpoints, len(marks)) - 1]
    first_checkpoint = marks[0]
    print(f"reference: {reference.wall_s:.1f} s; config.toml at {config_at:.2f} s, first "
          f"checkpoint at {first_checkpoint:.2f} s; kills drawn from 0-{window:.2f} s",
          flush=True)

    rows, computed, failures = [], 0, 0
    counts = {"fresh": 0, "restart": 0, "resume": 0}
    for cycle in range(1, args.cycles + 1):
        ranks, plain = draw_launch(rng)
        victim = int(rng.integers(ranks))
        if (run_dir / "config.toml").is_file():
            try:
                start = newest_checkpoint(run_dir)
            except CheckpointError:  # the previous cycle failed; this resume will be refused
                start = -1
            kind = "resume" if start else "restart"
            train_args = ["--resume", str(run_dir)]
        else:
            start, kind = 0, "fresh"
            force = ["--force"] if run_dir.is_dir() and any(run_dir.iterdir()) else []
            train_args = [args.config, *sets, "--run-dir", str(run_dir), *force]
        counts[kind] += 1
        phase = forced[cycle - 1] if cycle <= len(forced) else "any"
        if phase == "pre-config":
            kill = Kill(victim, float(rng.uniform(0, config_at / 2)), by_config=True)
        elif phase == "pre-checkpoint":
            # Halfway to the first checkpoint at the latest: a busy machine may finish a
            # generation or two between seeing one printed and the kill landing.
            kill = Kill(victim, float(rng.uniform(config_at, first_checkpoint)),
                        guard=start + args.checkpoint_every // 2, start=start)
        else:
            kill = Kill(victim, float(rng.uniform(0, window)))
        session = run_session(train_args, ranks, plain, run_dir, out / f"logs/cycle-{cycle:02d}",
                              kill, args.hang_s, args.timeout_s)
        outcome, after = _judge(session, start, run_dir)
        if kind == "restart" and session.generations \
                and "starting over from generation 0" not in session.stderr:
            outcome = "failed: no restart message"
        redone = sum(1 for g in session.generations if g <= computed)
        computed = max([computed, *session.generations])
        failures += not outcome.startswith(("survived", "finished"))
        rows.append({
            "cycle": cycle, "launch": kind, "command": launcher(ranks, plain), "ranks": ranks,
            "killed_rank": victim if session.killed_at is not None else "-",
            "kill_s": round(session.killed_at, 2) if session.killed_at is not None else "-",
            "kill_phase": _phase(session, run_dir, start, after),
            "from_gen": start,
            "reached": session.generations[-1] if session.generations else start,
            "ckpt_after": after if after is not None else "bad", "redone": redone,
            "exit": session.code, "outcome": outcome,
        })
        print("  ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)

    ranks, plain = draw_launch(rng)
    if (run_dir / "config.toml").is_file():
        final_args = ["--resume", str(run_dir)]
    else:
        force = ["--force"] if run_dir.is_dir() and any(run_dir.iterdir()) else []
        final_args = [args.config, *sets, "--run-dir", str(run_dir), *force]
    final = run_session(final_args, ranks, plain, run_dir, out / "logs/final", None,
                        args.hang_s, args.timeout_s)
    redone_total = sum(r["redone"] for r in rows) + sum(
        1 for g in final.generations if g <= computed)
    emit(rows, out, f"Chaos: {args.cycles} cycles of kill and resume, {args.config} "
         f"{' '.join(args.overrides)}, {args.generations} generations, checkpoint every "
         f"{args.checkpoint_every}, chaos seed {args.chaos_seed}")
    print(f"final resume: {launcher(ranks, plain)}, exit {final.code}, "
          f"{len(final.generations)} generations, {final.wall_s:.1f} s")
    if final.code != 0:
        print(f"the final resume failed:\n{final.stderr}")
        differ = ["the run did not finish"]
    else:
        differ = compare(reference_dir, run_dir)
    early = sum(1 for r in rows if r["kill_phase"] in ("before config", "before checkpoint"))
    kills = sum(1 for r in rows if r["kill_s"] != "-")
    print(f"cycles survived: {args.cycles - failures}/{args.cycles} ({kills} killed, "
          f"{early} of them before the first checkpoint or config; launches: "
          f"{counts['fresh']} original command, {counts['restart']} restart from generation 0, "
          f"{counts['resume']} resume)")
    print(f"generations redone: {redone_total} (run of {args.generations} generations)")
    finished = next((r["cycle"] for r in rows if r["outcome"] == "finished"), None)
    if finished is not None:
        print(f"note: the run was complete at cycle {finished}; later cycles killed nothing "
              "(raise --generations)")
    print("parameters bit-identical to the uninterrupted run: "
          + ("yes (policy.npz, final checkpoint, progress.csv rows)" if not differ
             else "NO: " + "; ".join(differ)))
    print(f"runs and logs: {out}")
    return 1 if failures or differ else 0


def _judge(session: Session, start: int, run_dir: Path) -> tuple[str, int | None]:
    """(outcome, newest intact checkpoint after the session)."""
    try:
        after = newest_checkpoint(run_dir)
    except CheckpointError:
        return "failed: no intact checkpoint", None
    if session.hang:
        return "failed: hang", after
    if session.strays:
        return f"failed: {len(session.strays)} ranks left running", after
    if session.killed_at is None:
        return ("finished", after) if session.code == 0 else (
            f"failed: exit {session.code} before the kill", after)
    if after < start:
        return "failed: checkpoint went back", after
    return "survived", after


def _phase(session: Session, run_dir: Path, start: int, after: int | None) -> str:
    """What the kill interrupted, as the run folder shows it."""
    if session.killed_at is None:
        return "-"
    if not (run_dir / "config.toml").is_file():
        return "before config"
    if after == start and start == 0:
        return "before checkpoint"
    return f"after ckpt {after}"


# Host-level chaos (--hosts): one elastic run on namespaced hosts. A gone host's link comes
# back once the run trains again without it, so a later launch may use it. Per fault: the host
# and kind, the seconds from the fault to the supervisor's "training again", the generations
# redone (trained before the fault minus the checkpoint resumed from), where the run went on.
FAULTS = ("gone", "kill", "stop")
RELAUNCH = re.compile(r"relaunch (\d+): lost (.*?) \((.*?)\); resumed from generation (\d+) on "
                      r"(.*?) \(\d+ ranks?\).*?; training again")


def hosts_with_ranks(cluster: FakeCluster) -> list[str]:
    return [host for host in cluster.hosts
            if any(b"es-train" in Path(f"/proc/{pid}/cmdline").read_bytes()
                   for pid in cluster.pids(host) if Path(f"/proc/{pid}").exists())]


def run_host_chaos(args: argparse.Namespace, sets: list[str], reference_dir: Path, run_dir: Path,
        logs: Path, compare) -> int:
    faults = [f for f in args.faults.split(",") if f]
    rng = np.random.default_rng(args.chaos_seed)
    print(f"reference: es-train {args.config} ... ({args.generations} generations, one "
          "process, uninterrupted, beside the elastic run)", flush=True)
    # Beside, not before: a task whose steps take wall time (es/Sleep-v0) plays slowly in
    # one process, and the reference need not be ready until the comparison.
    reference = subprocess.Popen([str(BIN / "es-train"), args.config, *sets, "--quiet",
                                  "--run-dir", str(reference_dir)], text=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rows, lines = [], []
    with FakeCluster(args.hosts) as cluster:
        hostfile = cluster.write_hostfile(logs / "hosts", args.ranks_per_host)
        command = [str(BIN / "es-train"), args.config, *sets, "--quiet", "--resume-or-start",
                   str(run_dir), "--elastic", "--hostfile", str(hostfile), "--max-restarts",
                   str(2 * args.cycles)]
        started = time.monotonic()
        job = subprocess.Popen(command, env=cluster.hydra_environment(), text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)

        def read() -> None:
            for line in job.stderr:
                lines.append((time.monotonic(), line))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        gone: list[str] = []
        for cycle in range(1, args.cycles + 1):
            wait_for = last_progress_generation(run_dir) + int(rng.integers(2, 6))
            while job.poll() is None and last_progress_generation(run_dir) < wait_for:
                time.sleep(0.02)
            for host in gone:  # trains again without it: it may come back
                cluster.reconnect(host)
            gone = []
            victims = hosts_with_ranks(cluster)
            if job.poll() is not None or not victims:
                print(f"the run ended (or had no ranks) before fault {cycle}", flush=True)
                break
            host, fault = str(rng.choice(victims)), str(rng.choice(faults))
            before, at = last_progress_generation(run_dir), time.monotonic()
            if fault == "gone":
                cluster.cut(host)
                gone.append(host)
            else:
                cluster.signal(host, signal.SIGKILL if fault == "kill" else signal.SIGSTOP,
                               "es-train")
            seen = len(lines)
            while job.poll() is None and not any(RELAUNCH.search(x) for _, x in lines[seen:]):
                time.sleep(0.05)
            relaunch = next(((t, m) for t, x in lines[seen:] if (m := RELAUNCH.search(x))),
                            None)
            if relaunch is None:
                rows.append({"fault": cycle, "host": host, "kind": fault, "outcome": "no relaunch"})
                break
            trained_at, match = relaunch
            rows.append({"fault": cycle, "host": host, "kind": fault, "lost": match.group(2),
                         "detected_by": match.group(3)[:40], "at_gen": before,
                         "resumed_from": int(match.group(4)),
                         "redone": before - int(match.group(4)),
                         "s_to_training": round(trained_at - at, 1),
                         "went_on_on": match.group(5)})
            print("  ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
        for host in gone:
            cluster.reconnect(host)
        code = job.wait(timeout=args.timeout_s)
        reader.join(5)
        wall = time.monotonic() - started
    (logs / "elastic.err").write_text("".join(x for _, x in lines))
    _, reference_err = reference.communicate()
    if reference.returncode != 0:
        print(f"the reference run failed (exit {reference.returncode}):\n{reference_err}")
        return 1
    if rows:
        emit(rows, args.out.resolve(), f"Host chaos: {len(rows)} faults ({args.faults}) on "
             f"{args.hosts} hosts x {args.ranks_per_host} ranks, {args.config} "
             f"{' '.join(args.overrides)}, {args.generations} generations, chaos seed "
             f"{args.chaos_seed}")
    differ = compare(reference_dir, run_dir) if code == 0 else ["the run did not finish "
                                                                f"(exit {code})"]
    survived = sum(1 for row in rows if "redone" in row)
    lost_s = [row["s_to_training"] for row in rows if "s_to_training" in row]
    redone = [row["redone"] for row in rows if "redone" in row]
    for kind in FAULTS:
        of_kind = [row for row in rows if row.get("kind") == kind and "redone" in row]
        if of_kind:
            seconds = [row["s_to_training"] for row in of_kind]
            print(f"{kind}: {len(of_kind)} faults, seconds from the fault to training again "
                  f"median {np.median(seconds):.1f} (max {max(seconds):.1f})")
    print(f"faults survived: {survived}/{args.cycles}; generations redone: {sum(redone)} "
          f"(at most {max(redone, default=0)} per fault); seconds lost per fault: median "
          f"{np.median(lost_s) if lost_s else float('nan'):.1f}; run {wall:.0f} s")
    print("parameters bit-identical to the uninterrupted run: "
          + ("yes (policy.npz, final checkpoint, progress.csv rows)" if not differ
             else "NO: " + "; ".join(differ)))
    print(f"runs and logs: {args.out.resolve()}")
    return 1 if differ or survived < args.cycles else 0


if __name__ == "__main__":
    run_script(main)
