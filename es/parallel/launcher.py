"""What a launcher tells a process before MPI starts, read from its environment alone: no
NumPy, no mpi4py, so a program can ask before it has loaded anything (es.cli.start)."""

import os


def launcher_rank() -> int:
    """This process's rank as its launcher numbered it (0 where none did): the one copy of
    several that reports a launch error."""
    for name in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        rank = os.environ.get(name, "")
        if rank.isdigit():
            return int(rank)
    return 0
