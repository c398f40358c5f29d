"""Run an MPI command across H network-namespaced "hosts" on this machine (root only): each
with its own hostname and address, TCP between them. See ``es/parallel/fake_cluster.py``.

    python scripts/fake_cluster.py --hosts 2 --ranks-per-host 2 -- es-train configs/cartpole.toml
"""

import sys

from es.cli.fake_cluster import main, parser  # noqa: F401  (parser: the CLI conventions test)

if __name__ == "__main__":
    sys.exit(main())
