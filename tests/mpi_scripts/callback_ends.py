"""Run under mpiexec: every rank calls ``es.train`` (argv[1] = "train", in the folder
argv[3]/run) or ``es.minimize`` ("minimize") with a callback that ends the program on rank 0
at its second generation: ``sys.exit()`` (argv[2] = "exit0"), ``sys.exit(3)`` ("exit3"),
``sys.exit("enough")`` ("message") or a KeyboardInterrupt ("interrupt"). Each rank writes
what it raised to argv[3]/rankN.txt, then raises it (mpiexec ends the job's other ranks once
one ends with a status other than 0, so a file may be missing)."""

import sys
from pathlib import Path

import numpy as np

import es
from es.parallel.comm import MPIComm

comm = MPIComm()
call, ending = sys.argv[1], sys.argv[2]


def end_at_the_second(row: dict) -> bool:
    if (row["generation"] if call == "train" else row["ngen"]) == 2:
        if ending == "interrupt":
            raise KeyboardInterrupt
        sys.exit({"exit0": None, "exit3": 3, "message": "enough"}[ending])
    return True


try:
    if call == "train":
        es.train("configs/pendulum.toml", {"es.population": 10, "env.max_episode_steps": 50,
                                           "run.generations": 8, "run.eval_every": 2},
                 run_dir=Path(sys.argv[3]) / "run", callback=end_at_the_second)
    else:
        es.minimize(lambda x: float(np.sum(x**2)), np.ones(4), 0.5, method="cma",
                    callback=end_at_the_second)
except BaseException as ended:
    result = getattr(ended, "result", None)
    what = f"SystemExit {ended.code!r}" if isinstance(ended, SystemExit) else \
        f"{type(ended).__name__} {None if result is None else result.ngen}"
    (Path(sys.argv[3]) / f"rank{comm.rank}.txt").write_text(what)
    raise
