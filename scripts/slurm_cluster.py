"""Run a command under a real Slurm on this machine (root only, Debian's slurm-wlm and munge):
slurmctld, and one slurmd and munged per network-namespaced node. See
``es/parallel/slurm_cluster.py``.

    python scripts/slurm_cluster.py --nodes 2 --cpus-per-node 2 -- srun -N 2 -n 4 hostname
"""

import sys

from es.cli.slurm_cluster import main, parser  # noqa: F401  (parser: the CLI conventions test)

if __name__ == "__main__":
    sys.exit(main())
