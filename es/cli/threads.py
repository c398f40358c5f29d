"""One BLAS thread per process, set before NumPy loads: imported first by the training
programs. ES parallelism comes from ranks, and OpenBLAS threads of several ranks on the same
cores thrash."""

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
