"""Host-level chaos for ``scripts/chaos.py --hosts H``: one elastic run (``es-train
--elastic`` over a hostfile) on H network-namespaced hosts, and at random moments a random
host running ranks is made *gone* (link down, every process killed: a dead machine), *kill*
(its ranks killed, the machine alive) or *stop* (its ranks stopped with SIGSTOP: a hang).
A gone host's link comes back once the run trains again without it, so a later launch may
use it. The run must end by itself, bit-identical to an uninterrupted one-process run.

Per fault: the host and kind, when the supervisor's relaunch line said training went on
(seconds from the fault), the generations redone (trained before the fault minus the
checkpoint resumed from) and where the run went on.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
from report import BIN, emit

from es.parallel.fake_cluster import FakeCluster

FAULTS = ("gone", "kill", "stop")
RELAUNCH = re.compile(r"relaunch (\d+): lost (.*?) \((.*?)\); resumed from generation (\d+) on "
                      r"(.*?) \(\d+ ranks?\).*?; training again")


def last_generation(run_dir: Path) -> int:
    try:
        lines = (run_dir / "progress.csv").read_text().strip().splitlines()
    except OSError:
        return 0
    first = lines[-1].split(",", 1)[0] if len(lines) > 1 else ""
    return int(first) if first.isdigit() else 0


def hosts_with_ranks(cluster: FakeCluster) -> list[str]:
    return [host for host in cluster.hosts
            if any(b"es-train" in Path(f"/proc/{pid}/cmdline").read_bytes()
                   for pid in cluster.pids(host) if Path(f"/proc/{pid}").exists())]


def run(args: argparse.Namespace, sets: list[str], reference_dir: Path, run_dir: Path,
        logs: Path, compare) -> int:
    faults = [f for f in args.faults.split(",") if f]
    rng = np.random.default_rng(args.chaos_seed)
    print(f"reference: es-train {args.config} ... ({args.generations} generations, one "
          "process, uninterrupted)", flush=True)
    done = subprocess.run([str(BIN / "es-train"), args.config, *sets, "--quiet", "--run-dir",
                           str(reference_dir)], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"the reference run failed (exit {done.returncode}):\n{done.stderr}")
        return 1
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
            wait_for = last_generation(run_dir) + int(rng.integers(2, 6))
            while job.poll() is None and last_generation(run_dir) < wait_for:
                time.sleep(0.02)
            for host in gone:  # trains again without it: it may come back
                cluster.reconnect(host)
            gone = []
            victims = hosts_with_ranks(cluster)
            if job.poll() is not None or not victims:
                print(f"the run ended (or had no ranks) before fault {cycle}", flush=True)
                break
            host, fault = str(rng.choice(victims)), str(rng.choice(faults))
            before, at = last_generation(run_dir), time.monotonic()
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
