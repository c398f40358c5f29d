"""The exit codes that tell a batch script or a supervisor how a run ended, beyond 0 (done),
1 (failed) and 128 + N (killed by signal N)."""

#: Refused: a bad command line or config, said in one line before any run started.
USAGE_ERROR = 2

#: Stopped by SIGTERM, SIGUSR1 or SIGUSR2 with its checkpoint written (EX_TEMPFAIL), and the
#: elastic supervisor with too few nodes: the same command continues the run. A batch script
#: tells it from 128 + N, what srun reports for ranks killed by signal N before they could
#: save.
CHECKPOINTED = 75
#: A peer rank went silent for run.peer_timeout_s (stopped, hung or cut off): the job ended,
#: its newest checkpoint is intact, and the run continues on the ranks that are left (what
#: the elastic supervisor does by itself).
PEER_LOST = 76
