"""The argument checks of ``es.minimize`` and ``es.AskTell``: every mistake is a one-line
``TypeError`` or ``ValueError`` that names the argument, its value and what is allowed, raised
before anything runs (no worker spawned, no point evaluated), never a library's traceback or
a value quietly changed or ignored.

Keywords that are not the facade's own go to the strategy: the ones its constructor takes
(less those the facade sets itself), or for ``cma`` pycma's options (``cma.CMAOptions()``,
case-insensitive as pycma reads them) less those that duplicate a facade argument, which
are refused with the argument to use instead (pycma's ``maxfevals`` would otherwise be
quietly ignored: the facade, not pycma, decides when a run ends).

``bounds`` (``cma`` only, through pycma's boundary handling) are pycma's ``[lower, upper]``
(each None, a number or one number per coordinate), scipy's one ``(low, high)`` pair per
coordinate (None: unbounded), or an object with ``lb`` and ``ub`` (``scipy.optimize.Bounds``).
"""

from __future__ import annotations

import difflib
import inspect
import math
import reprlib
from collections.abc import Iterable
from numbers import Real
from typing import Any

import numpy as np

#: Strategy constructor arguments the facade sets itself, and what to say about each.
SET_BY_FACADE = {"mean0": "use x0", "theta0": "use x0", "population": "use popsize",
                 "sigma": "use sigma0", "seed": "use seed",
                 "noise": "directions are regenerated from seeds",
                 "dtype": "black-box runs are float64",
                 "optimizer": "it is Adam; its step is lr"}

#: pycma options that duplicate an argument of the facade (which decides when a run ends and
#: how pycma samples), or that do not work through it, with what to pass instead. pycma's
#: stop() is consulted only for the conditions on its model
#: (``es.strategies.external.CMA_LOCAL_STOPS``), so these would be ignored, not honoured.
PYCMA_OWNED = {
    "maxfevals": "max_evals (the budget over all runs)",
    "maxiter": "max_generations (over all runs), or maxiter=True/False (pycma's per-run "
               "default on or off)",
    "timeout": "timeout_s",
    "ftarget": "ftarget", "tolfun": "tolfun", "tolx": "tolx", "tolfunhist": "tolfunhist",
    "tolflatfitness": "flatfitness=True/False",
    "tolstagnation": "stagnation=True/False",
    "tolfunrel": "tolfun or tolfunhist (tolfunrel is not implemented)",
    "termination_callback": "callback= of es.minimize",
    "popsize": "popsize", "popsize_factor": "popsize",
    "seed": "seed", "randn": "seed (pycma samples from a generator seeded by it)",
    "is_feasible": "a NaN from fun where x is infeasible (pycma's ask/tell never calls "
                   "is_feasible; NaN ranks below every value)",
    "fixed_variables": "fixed coordinates in fun (x0 of the free ones only; fun inserts the "
                       "fixed values): pycma's candidates would then not have x0's size",
    "verb_disp": "callback= (each generation's row) or the result's history: pycma prints "
                 "nothing here",
    "verbose": "callback= or the result's history: pycma prints nothing here",
}


def short(value: Any) -> str:
    """A one-line repr, abbreviated: a long vector in a message would fill the screen."""
    if isinstance(value, np.ndarray):
        text = np.array2string(value, threshold=8, edgeitems=3, separator=", ",
                               max_line_width=10**6)
        return " ".join(text.split())
    abbreviate = reprlib.Repr()
    abbreviate.maxlist = abbreviate.maxtuple = 8
    abbreviate.maxstring, abbreviate.maxother = 40, 60
    return abbreviate.repr(value)


def is_real(value: Any) -> bool:
    """A real number, not a bool (``True`` as a step size or a budget is a mistake)."""
    return isinstance(value, Real | np.floating | np.integer) and not isinstance(
        value, bool | np.bool_)


def is_integer(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def kind(value: Any) -> str:
    return type(value).__name__


def as_x0(x0: Any) -> np.ndarray:
    """``x0`` as a float64 vector: 1-D (a 2-D array is refused, not flattened; a number is
    one coordinate, as scipy takes it), numbers, finite."""
    if x0 is None or isinstance(x0, str | bytes):
        raise TypeError(f"x0 {x0!r}: must be a 1-D vector of numbers, the start point")
    try:  # what float64 would take quietly: '1' as 1, True as 1, 1+5j as 1, None as NaN
        loose = np.asarray(x0).dtype.kind in "OUSbc"
    except ValueError:  # ragged: float64 refuses it below
        loose = False
    for entry in np.asarray(x0, dtype=object).ravel() if loose else ():
        if not is_real(entry):
            raise TypeError(f"x0 has {entry!r} ({kind(entry)}): its entries must be real "
                            "numbers")
    try:
        array = np.array(x0, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"x0 {short(x0)}: must be a 1-D vector of numbers, the start "
                        "point") from None
    if array.ndim == 0:
        array = array.reshape(1)
    if array.ndim != 1:
        raise ValueError(f"x0 must be 1-D, got shape {array.shape} (x0.ravel() for its "
                         f"{array.size} numbers as one vector)")
    if array.size < 1 or not np.all(np.isfinite(array)):
        raise ValueError(f"x0 must be a non-empty finite vector, got {short(array)}")
    return array


def check_sigma0(sigma0: Any) -> float:
    if np.ndim(sigma0) != 0:
        raise ValueError(f"sigma0 {short(sigma0)}: must be one number > 0, the step size of "
                         "every coordinate (coordinates of other scales: rescale them in fun)")
    if isinstance(sigma0, np.ndarray):  # a 0-d array, as x0 may be one
        sigma0 = sigma0.item()
    if not is_real(sigma0):
        raise TypeError(f"sigma0 {sigma0!r}: must be a number > 0, not {kind(sigma0)}")
    if not (math.isfinite(sigma0) and sigma0 > 0):
        raise ValueError(f"sigma0 {sigma0!r}: must be one finite number > 0")
    return float(sigma0)


def check_limit(name: str, value: Any) -> None:
    """A budget: None (no such limit) or a number > 0 (``1e5`` evaluations is fine)."""
    if value is None:
        return
    if not is_real(value):
        raise TypeError(f"{name} {value!r}: must be a number > 0 or None (no such limit), "
                        f"not {kind(value)}")
    # A zero or negative budget would return x0 unevaluated (fun = inf) as if it had run.
    if not value > 0:
        raise ValueError(f"{name} {value}: must be > 0 (None: no such limit)")


def check_integer(name: str, value: Any, minimum: int) -> None:
    """An integer (a float or a bool would otherwise be rounded or read as 0/1 quietly)."""
    if not is_integer(value):
        raise TypeError(f"{name} {value!r}: must be an integer >= {minimum}, not {kind(value)}")
    if value < minimum:
        raise ValueError(f"{name} {value}: must be >= {minimum}")


def check_flag(name: str, value: Any, hint: str = "") -> None:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} {value!r}: must be True or False{hint}")


def check_tolerance(name: str, value: Any) -> None:
    """None or False (off), or a number >= 0."""
    if value is None or value is False:
        return
    if not is_real(value) or not value >= 0:
        raise TypeError(f"{name} {value!r}: must be a number >= 0, or None/False (off)")


def check_ftarget(value: Any) -> None:
    """None or a finite number: ``inf`` would stop before the first evaluation and NaN never."""
    if value is not None and not is_real(value):
        raise TypeError(f"ftarget {value!r}: must be a number or None, not {kind(value)}")
    if value is not None and not math.isfinite(value):
        raise ValueError(f"ftarget {value!r}: must be a finite number or None (no target)")


def pycma_options() -> dict[str, str]:
    """pycma's option names by their lower case (pycma reads them case-insensitively)."""
    from es.strategies.external import import_cma

    return {name.lower(): name for name in import_cma().CMAOptions()}


def strategy_keywords(cls: type, method: str) -> list[str]:
    """The keywords a strategy class takes from the user: its constructor's, less those the
    facade sets itself (``optimizer`` only for ``openai``, whose optimizer is Adam: PGPE's
    is a name, ``"clipup"`` or ``"adam"``)."""
    facade = set(SET_BY_FACADE) - ({"optimizer"} if method == "pgpe" else set())
    parameters = inspect.signature(cls).parameters.values()
    return sorted(p.name for p in parameters if p.name not in facade
                  and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))


def check_keyword_value(label: str, cls: type, key: str, value: Any) -> None:
    """A strategy keyword's value of the type its constructor declares: a finite number for
    a ``float``, an integer for an ``int``, True/False for a ``bool``, a string for a
    ``str`` (None where the declaration allows it). The strategy checks the range; a string
    step size or a NaN would otherwise reach its arithmetic, or pass its ``> 0`` test."""
    declared = "float" if key == "lr" else inspect.signature(cls).parameters[key].annotation
    hint = (declared if isinstance(declared, str)  # postponed: the module's own words
            else getattr(declared, "__name__", "")).replace(" ", "")
    optional = hint.endswith("|None")
    hint = hint.removesuffix("|None")
    if value is None and optional:
        return
    wanted = {"float": ("a finite number", lambda v: is_real(v) and math.isfinite(v)),
              "int": ("an integer", is_integer),
              "bool": ("True or False", lambda v: isinstance(v, bool | np.bool_)),
              "str": ("a string", lambda v: isinstance(v, str))}.get(hint)
    if wanted is not None and not wanted[1](value):
        raise TypeError(f"{label}: {key}={short(value)} must be {wanted[0]}"
                        f"{' or None' if optional else ''}, not {kind(value)}")


def check_options(method: str, label: str, options: dict[str, Any], cls: type,
                  own: Iterable[str]) -> dict[str, Any]:
    """``options`` for the strategy ``method`` (``label`` names it as the user asked for it,
    e.g. "method 'auto' (here 'cma', d = 5)"), with pycma's names made canonical; an unknown
    or conflicting keyword is a one-line error. ``own``: the facade's argument names, offered
    as close matches (``maxevals`` -> ``max_evals``)."""
    own = sorted(own)
    for key in options:
        if key in own:  # only es.minimize's arguments reach here: AskTell has no such one
            raise ValueError(f"{label}: keyword {key!r} is es.minimize's, not es.AskTell's: "
                             "an ask/tell loop evaluates its candidates itself")
    if method == "cma":
        names = pycma_options()
        checked = {}
        for key, value in options.items():
            if key == "bounds":
                checked[key] = value
                continue
            if key == "mirrored":
                raise ValueError(f"{label}: keyword 'mirrored' is not taken: pycma samples its "
                                 "own candidates (its option for mirrors is CMA_mirrors)")
            canonical = names.get(key.lower())
            if canonical is None:
                close = difflib.get_close_matches(
                    key, sorted({*own, *set(names.values()) - set(PYCMA_OWNED), "bounds"}), n=3)
                raise ValueError(f"{label}: unknown keyword {key!r}{did_you_mean(close)}; "
                                 "its keywords are bounds and pycma's options (the names in "
                                 "cma.CMAOptions())")
            if canonical in PYCMA_OWNED:
                raise ValueError(f"{label}: pycma's option {key}={short(value)} is not "
                                 f"taken here: use {PYCMA_OWNED[canonical]}")
            checked[canonical] = value
        return checked
    allowed = strategy_keywords(cls, method) + (["lr"] if method == "openai" else [])
    for key, value in options.items():
        if key in allowed:
            check_keyword_value(label, cls, key, value)
            continue
        if key == "bounds":
            continue  # check_bounds says which methods take them
        if key in SET_BY_FACADE:
            raise ValueError(f"{label}: keyword {key!r} is set by es.minimize/es.AskTell "
                             f"itself: {SET_BY_FACADE[key]}")
        close = difflib.get_close_matches(key, [*own, *allowed], n=3)
        raise ValueError(f"{label}: unknown keyword {key!r}{did_you_mean(close)}; its "
                         f"keywords are {', '.join(allowed)}")
    return dict(options)


def did_you_mean(close: list[str]) -> str:
    close = list(dict.fromkeys(close))
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


def _side(value: Any, dim: int, infinite: float) -> np.ndarray | None:
    """One side of pycma's ``[lower, upper]``: None, a number, or ``dim`` numbers (None:
    unbounded); None if it is none of these."""
    if value is None:
        return np.full(dim, infinite)
    if is_real(value):
        return np.full(dim, float(value))
    if isinstance(value, str | bytes) or np.ndim(value) != 1 or len(value) != dim:
        return None
    try:
        return np.array([infinite if entry is None else entry for entry in value],
                        dtype=np.float64)
    except (TypeError, ValueError):
        return None


def _readings(bounds: Any, dim: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Every way ``bounds`` reads as (form, lower, upper)."""
    if hasattr(bounds, "lb") and hasattr(bounds, "ub"):
        lower, upper = _side(bounds.lb, dim, -math.inf), _side(bounds.ub, dim, math.inf)
        return [] if lower is None or upper is None else [("lb/ub", lower, upper)]
    if isinstance(bounds, str | bytes) or not isinstance(bounds, Iterable):
        return []
    entries = list(bounds)
    readings = []
    if len(entries) == 2:
        lower, upper = _side(entries[0], dim, -math.inf), _side(entries[1], dim, math.inf)
        if lower is not None and upper is not None:
            readings.append(("pycma's [lower, upper]", lower, upper))
    if len(entries) == dim and all(
            not isinstance(pair, str | bytes) and np.ndim(pair) == 1 and len(pair) == 2
            for pair in entries):
        lower = _side([low for low, _ in entries], dim, -math.inf)
        upper = _side([high for _, high in entries], dim, math.inf)
        if lower is not None and upper is not None:
            readings.append(("scipy's (low, high) pairs", lower, upper))
    return readings


def _valid(lower: np.ndarray, upper: np.ndarray) -> bool:
    return bool(np.all(lower < upper) and not np.any(np.isnan(lower) | np.isnan(upper)))


def check_bounds(bounds: Any, dim: int, x0: np.ndarray,
                 method: str, label: str) -> list[list[float] | None] | None:
    """``bounds`` as pycma's ``[lower, upper]`` (None for a side unbounded everywhere, else
    ``dim`` numbers, +-inf where unbounded), or None without bounds; any other form, bounds
    that contradict themselves, an ``x0`` outside them, or a method other than ``cma`` is a
    one-line error."""
    if bounds is None:
        return None
    forms = (f"pycma's [lower, upper] (each None, a number or {dim} numbers), scipy's {dim} "
             "(low, high) pairs (None: unbounded), or an object with .lb and .ub "
             "(scipy.optimize.Bounds)")
    readings = _readings(bounds, dim)
    if not readings:
        raise ValueError(f"bounds {short(bounds)} at d = {dim}: allowed are {forms}")
    valid = [reading for reading in readings if _valid(reading[1], reading[2])]
    if not valid:
        form, lower, upper = readings[0]
        i = int(np.argmax(~(lower < upper)))
        raise ValueError(f"bounds {short(bounds)} read as {form}: coordinate {i} has lower "
                         f"{lower[i]} and upper {upper[i]}; each lower bound must be below "
                         "its upper bound (fix a coordinate inside fun instead)")
    if len(valid) > 1 and not (np.array_equal(valid[0][1], valid[1][1])
                               and np.array_equal(valid[0][2], valid[1][2])):
        raise ValueError(f"bounds {short(bounds)} at d = 2 read both as pycma's [lower, upper] "
                         "and as scipy's (low, high) pairs, and these differ: pass an object "
                         "with .lb and .ub (scipy.optimize.Bounds(lb, ub), or "
                         "types.SimpleNamespace(lb=..., ub=...))")
    _, lower, upper = valid[0]
    if method != "cma":
        raise ValueError(f"{label}: bounds are handled by method 'cma' alone (pycma's "
                         "boundary handling): pass method='cma', or map x into the bounds "
                         "inside fun")
    outside = np.flatnonzero((x0 < lower) | (x0 > upper))
    if outside.size:
        i = int(outside[0])
        raise ValueError(f"x0[{i}] = {x0[i]} is outside the bounds [{lower[i]}, {upper[i]}] "
                         f"({outside.size} coordinate(s) outside): start inside them")
    if np.all(np.isinf(lower)) and np.all(np.isinf(upper)):
        return None
    return [None if np.all(np.isinf(side)) else side.tolist() for side in (lower, upper)]
