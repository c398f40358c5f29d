"""``es.functions``: the test functions where users reach for them (``es.functions.sphere``);
they live in ``es.blackbox.functions``."""

from es.blackbox.functions import ackley, ellipsoid, rastrigin, rosenbrock, sphere

__all__ = ["ackley", "ellipsoid", "rastrigin", "rosenbrock", "sphere"]
