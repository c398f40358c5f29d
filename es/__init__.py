"""Evolution strategies (Salimans et al. 2017) distributed over MPI.

Importing ``es`` is cheap and has no side effects: NumPy, Gymnasium and mpi4py are imported
by the submodules that need them, so ``es.cli`` can pin BLAS threads before NumPy loads.
"""

__version__ = "0.1.0"
