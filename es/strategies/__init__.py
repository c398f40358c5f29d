"""The family of evolution strategies behind one ask/tell protocol (``base``).

Each strategy is pure (no MPI, no Gymnasium, no files): ``es-train`` drives it over MPI
ranks, ``es.minimize`` and the ask/tell facades drive it on a Python function.
"""

from es.strategies.ars import ARS
from es.strategies.base import ExplicitGeneration, Generation, NoiseGeneration, Strategy
from es.strategies.external import CMA, External
from es.strategies.openai_es import OpenAIES
from es.strategies.pgpe import PGPE
from es.strategies.sep_cma import SepCMA
from es.strategies.snes import SNES

#: Strategies by the name ``es.strategy`` and ``es.minimize(method=...)`` use.
STRATEGIES: dict[str, type] = {
    cls.name: cls for cls in (OpenAIES, SNES, ARS, PGPE, SepCMA, CMA)
}

__all__ = ["ARS", "CMA", "PGPE", "SNES", "STRATEGIES", "ExplicitGeneration", "External",
           "Generation", "NoiseGeneration", "OpenAIES", "SepCMA", "Strategy"]
