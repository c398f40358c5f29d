"""Every measurement: scaling and communication, the learning suite, the baselines against
published results, BBOB and high-dimensional black-box runs, ES against the baselines, learning
curves. ``report`` holds the tables and plot helpers they share and imports none of them.
Their command lines are in ``es.cli``."""
