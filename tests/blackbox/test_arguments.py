"""es.minimize / es.AskTell arguments as a user trial found them: every mistake a one-line error
naming the argument and what is allowed, raised before anything runs (keywords for the
strategy, bounds, x0, numbers, the function's values); bounds through pycma for ``cma``;
the documented restart populations; a short ``Result`` repr; ``dir(es)``."""

import subprocess
import sys
import types

import numpy as np
import pytest

import es
import es.parallel.evaluate
from es.blackbox.minimizer import FunctionValueError, Result

SPHERE = es.functions.sphere


def one_line_error(error_type, call, *fragments):
    """The error ``call`` raises: of ``error_type``, one short line, with every fragment."""
    with pytest.raises(error_type) as raised:
        call()
    message = str(raised.value)
    assert "\n" not in message and len(message) < 400, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fails the test if ``minimize`` got as far as making its evaluator (spawning workers)."""
    def refuse(*args, **kwargs):
        raise AssertionError("the evaluator was made: the check came too late")

    monkeypatch.setattr(es.parallel.evaluate, "make_evaluator", refuse)


def never_called(x):
    raise AssertionError("fun was called: the check came too late")


# ---- keywords for the strategy ----------------------------------------------------------------

@pytest.mark.usefixtures("nothing_runs")
def test_unknown_keywords_name_the_keyword_the_method_and_the_close_or_allowed_ones():
    x0 = np.ones(5)
    one_line_error(ValueError, lambda: es.minimize(never_called, x0, 0.5, method="snes",
                                                   maxevals=100, workers=2),
                   "method 'snes'", "unknown keyword 'maxevals'", "did you mean 'max_evals'",
                   "lr_mean, lr_sigma, mirrored")
    # pycma's ~80 option names are not dumped: the close ones are named instead.
    message = one_line_error(ValueError, lambda: es.minimize(never_called, x0, 0.5,
                                                             tolfn=1e-3),
                             "method 'auto' (here 'cma', d = 5)", "unknown keyword 'tolfn'",
                             "did you mean 'tolfun'", "cma.CMAOptions()")
    assert "CMA_active" not in message
    one_line_error(ValueError, lambda: es.minimize(never_called, x0, 0.5, method="cma",
                                                   lr=0.1),
                   "method 'cma'", "unknown keyword 'lr'", "pycma's options")
    one_line_error(ValueError, lambda: es.AskTell("sepcma", x0, 0.5, pop_size=8),
                   "unknown keyword 'pop_size'", "did you mean 'popsize'")
    # es.minimize's own arguments, given to AskTell, were "unknown (did you mean 'workers'?)".
    for method in ("snes", "cma"):
        for key in ("vectorized", "workers", "callback"):
            one_line_error(ValueError, lambda m=method, k=key: es.AskTell(m, x0, 0.5, **{k: True}),
                           f"method '{method}': keyword '{key}' is es.minimize's, not "
                           "es.AskTell's: an ask/tell loop evaluates its candidates itself")


@pytest.mark.usefixtures("nothing_runs")
def test_pycma_options_that_duplicate_the_facades_own_are_refused_with_what_to_use():
    x0 = np.ones(5)
    for key, value, instead in [("maxfevals", 50, "use max_evals"),
                                ("MaxFEvals", 50, "use max_evals"),  # pycma's any case
                                ("maxiter", 50, "max_generations"),  # the bool flag's type
                                ("timeout", 5, "use timeout_s"),
                                ("TolFun", 1e-3, "use tolfun"),
                                ("tolstagnation", 10, "stagnation=True/False"),
                                ("termination_callback", print, "callback"),
                                ("popsize_factor", 2, "use popsize"),
                                ("is_feasible", print, "NaN"),
                                # Taken by pycma but not working through the facade: a
                                # NumPy error after a generation; pycma's printing: nothing.
                                ("fixed_variables", {0: 1.0}, "fixed coordinates in fun"),
                                ("verb_disp", 1, "callback="), ("verbose", 3, "callback=")]:
        error = TypeError if key == "maxiter" else ValueError
        one_line_error(error, lambda key=key, value=value: es.minimize(
            never_called, x0, 0.5, method="cma", **{key: value}), key, instead)
    one_line_error(ValueError, lambda: es.AskTell("cma", x0, 0.5, mirrored=True),
                   "'mirrored' is not taken", "CMA_mirrors")
    one_line_error(ValueError, lambda: es.AskTell("openai", x0, 0.5, optimizer=None),
                   "'optimizer' is set by es.minimize/es.AskTell itself", "lr")
    one_line_error(ValueError, lambda: es.AskTell("snes", x0, 0.5, population=8),
                   "'population' is set", "use popsize")
    one_line_error(TypeError, lambda: es.AskTell("snes", x0, 0.5, mirrored="no"),
                   "method 'snes': mirrored='no' must be True or False")


def test_a_pycma_option_in_any_case_reaches_pycma():
    opt = es.AskTell("cma", np.ones(4), 0.5, popsize=6, cma_diagonal=True)
    assert opt.strategy.inner.options["CMA_diagonal"] is True
    plain = es.minimize(SPHERE, np.ones(4), 0.5, max_generations=3)
    diagonal = es.minimize(SPHERE, np.ones(4), 0.5, max_generations=3, CMA_diagonal=True)
    assert plain.nfev == diagonal.nfev == 24 and diagonal.ngen == 3


# ---- bounds -------------------------------------------------------------------------------------

def test_bounds_in_scipys_pycmas_and_lb_ub_forms_are_the_same_bounds_for_cma():
    x0, kwargs = np.full(5, 0.5), {"method": "cma", "seed": 2, "max_evals": 600}
    scipy_form = es.minimize(SPHERE, x0, 0.3, bounds=[(0.2, 1.0)] * 5, **kwargs)
    pycma_form = es.minimize(SPHERE, x0, 0.3, bounds=[0.2, 1.0], **kwargs)
    vectors = es.minimize(SPHERE, x0, 0.3, bounds=[[0.2] * 5, [1.0] * 5], **kwargs)
    lb_ub = es.minimize(SPHERE, x0, 0.3, bounds=types.SimpleNamespace(lb=0.2, ub=1.0), **kwargs)
    for other in (pycma_form, vectors, lb_ub):
        np.testing.assert_array_equal(other.x, scipy_form.x)
    # The minimum of the sphere over [0.2, 1]^5 is the corner 0.2; every point inside.
    assert np.all(scipy_form.x >= 0.2) and np.all(scipy_form.x <= 1.0)
    assert np.all(scipy_form.x_mean >= 0.2)  # pycma's mean mapped into the bounds
    assert scipy_form.fun == pytest.approx(5 * 0.04, abs=1e-3)
    # None: unbounded on that side.
    half = es.minimize(SPHERE, x0, 0.3, bounds=[(0.2, None)] + [(None, None)] * 4, **kwargs)
    assert half.x[0] >= 0.2 and half.fun == pytest.approx(0.04, abs=1e-3)


def test_every_candidate_asked_lies_inside_the_bounds():
    opt = es.AskTell("cma", np.zeros(3), 2.0, seed=1, max_generations=20,
                     bounds=[(-1, 1), (0, 0.5), (None, 3)])
    while not opt.stop():
        xs = opt.ask()
        assert np.all(xs >= [-1, 0, -np.inf]) and np.all(xs <= [1, 0.5, 3])
        opt.tell(xs, [float(np.sum((x - 5) ** 2)) for x in xs])


@pytest.mark.usefixtures("nothing_runs")
def test_bounds_that_cannot_be_honoured_are_refused_in_one_line():
    def call(x0=None, **kwargs):
        x0 = np.full(5, 0.5) if x0 is None else x0
        return lambda: es.minimize(never_called, x0, 0.3, **kwargs)

    one_line_error(ValueError, call(method="sepcma", bounds=[(-1, 1)] * 5),
                   "method 'sepcma'", "bounds are handled by method 'cma' alone")
    one_line_error(ValueError, call(np.full(101, 0.5), bounds=[0, 1]),
                   "method 'auto' (here 'sepcma', d = 101)", "method='cma'")
    one_line_error(ValueError, call(bounds=[(-1, 1)] * 4), "bounds [(-1, 1), (-1, 1)",
                   "(low, high) pairs", ".lb and .ub")
    one_line_error(ValueError, call(bounds="abc"), "bounds 'abc'")
    one_line_error(ValueError, call(bounds=[1, 0]), "coordinate 0 has lower 1.0 and upper 0.0")
    one_line_error(ValueError, call(bounds=[(0, 1), (1, 1), (0, 1), (0, 1), (0, 1)]),
                   "coordinate 1")
    one_line_error(ValueError, call(np.array([0.5, 0.5, 2.0, 0.5, 0.5]), bounds=[0, 1]),
                   "x0[2] = 2.0 is outside the bounds [0.0, 1.0]")
    # d = 2: [lower, upper] and two (low, high) pairs read differently: say which.
    one_line_error(ValueError, call(np.array([0.5, 2.5]), bounds=[(0, 1), (2, 3)]),
                   "read both as pycma's [lower, upper] and as scipy's", ".lb and .ub")


def test_at_d_2_bounds_that_read_one_way_only_are_taken():
    x0, kwargs = np.array([0.5, 0.5]), {"method": "cma", "max_generations": 3}
    pairs = es.AskTell("cma", x0, 0.3, bounds=[(-1, 1), (-2, 2)])
    assert pairs.bounds == [[-1.0, -2.0], [1.0, 2.0]]  # as [lower, upper] it is empty
    same = es.AskTell("cma", [0.1, 0.5], 0.3, bounds=[[0, 0.2], [0.2, 1]])  # both readings agree
    assert same.bounds == [[0.0, 0.2], [0.2, 1.0]]
    assert es.minimize(SPHERE, x0, 0.3, bounds=[(-1, 1), (-2, 2)], **kwargs).ngen == 3


# ---- x0, numbers, flags, the function's values --------------------------------------------------

def test_a_number_as_x0_is_one_coordinate_as_scipy_takes_it():
    result = es.minimize(lambda x: float((x[0] - 1) ** 2), 3.0, 0.5, method="snes",
                         max_generations=50)
    assert result.x.shape == (1,) and abs(result.x[0] - 1) < 0.1


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize(("kwargs", "error", "fragment"), [
    ({"x0": np.zeros((2, 3))}, ValueError, "x0 must be 1-D, got shape (2, 3)"),
    ({"x0": None}, TypeError, "x0 None: must be a 1-D vector of numbers"),
    ({"x0": "abc"}, TypeError, "x0 'abc': must be a 1-D vector of numbers"),
    ({"x0": [1, [2, 3]]}, TypeError, "x0 [1, [2, 3]]"),
    # float64 took these quietly: '1' as 1, True as 1, 1+5j as 1 (a warning), None as NaN
    ({"x0": ["1", "2"]}, TypeError, "x0 has '1' (str): its entries must be real numbers"),
    ({"x0": [True, False]}, TypeError, "x0 has True (bool): its entries must be real numbers"),
    ({"x0": np.array([1 + 5j, 2])}, TypeError, "x0 has (1+5j) (complex): its entries must"),
    ({"x0": [1, None]}, TypeError, "x0 has None (NoneType): its entries must be real numbers"),
    ({"sigma0": "0.5"}, TypeError, "sigma0 '0.5': must be a number > 0, not str"),
    ({"sigma0": np.inf}, ValueError, "sigma0 inf"),
    ({"max_evals": "100"}, TypeError, "max_evals '100': must be a number > 0 or None"),
    ({"max_generations": True}, TypeError, "max_generations True"),
    ({"popsize": 7.5}, TypeError, "popsize 7.5: must be an integer >= 2, not float"),
    # A generation is evaluated whole: 100,000 evaluations for a budget of 100.
    ({"popsize": 100_000, "max_evals": 100}, ValueError,
     "popsize 100000: more than max_evals = 100, and each generation evaluates all of its "
     "popsize points: lower popsize or raise max_evals"),
    # The default popsize likewise: 7 evaluations, stop_reason 'max_evals', for a budget of 3.
    ({"max_evals": 3}, ValueError, "max_evals 3: less than one generation, whose 7 points "
     "(the default popsize at d = 3) are evaluated whole: raise max_evals or give popsize <= 3"),
    # Mirrored: an odd popsize the hint named was then refused; below 2 none to name.
    ({"method": "snes", "max_evals": 7}, ValueError, "max_evals 7: less than one generation, "
     "whose 8 points (the default popsize at d = 3) are evaluated whole: raise max_evals or "
     "give popsize <= 6 (even: mirrored pairs)"),
    ({"method": "snes", "max_evals": 1}, ValueError, "max_evals 1: less than one generation, "
     "whose 8 points (the default popsize at d = 3) are evaluated whole: raise max_evals"),
    # With no budget given, the refusal named the default max_evals as if it had been.
    ({"x0": np.zeros(1), "popsize": 20_000}, ValueError, "popsize 20000: more than the default "
     "max_evals = 10000 (10,000 per dimension), and each generation evaluates all of its "
     "popsize points: lower popsize or set max_evals"),
    ({"restarts": 1.5}, TypeError, "restarts 1.5: must be an integer >= 0, not float"),
    ({"restarts": True}, TypeError, "restarts True: must be an integer >= 0, not bool"),
    ({"workers": 2.0}, TypeError, "workers 2.0: must be an integer >= 1"),
    ({"maxiter": 50}, TypeError, "maxiter 50: must be True or False"),
    ({"bipop": "yes"}, TypeError, "bipop 'yes': must be True or False"),
    ({"vectorized": 1}, TypeError, "vectorized 1: must be True or False"),
    ({"tolfun": "1e-3"}, TypeError, "tolfun '1e-3'"),
    ({"ftarget": "0"}, TypeError, "ftarget '0'"),
    ({"ftarget": np.inf}, ValueError, "ftarget inf: must be a finite number or None"),
    ({"ftarget": np.nan}, ValueError, "ftarget nan: must be a finite number or None"),
    ({"method": np.zeros(3)}, TypeError, "method [0., 0., 0.]: must be a strategy's name"),
    ({"method": ["cma"]}, TypeError, "method ['cma']: must be a strategy's name, one of 'auto'"),
    # Strategy keywords of the wrong type: their constructors' declared types.
    ({"method": "openai", "lr": "0.01"}, TypeError,
     "method 'openai': lr='0.01' must be a finite number, not str"),
    ({"method": "snes", "lr_mean": np.inf}, TypeError, "lr_mean=inf must be a finite number"),
    ({"method": "ars", "lr": np.nan}, TypeError, "lr=nan must be a finite number"),
    ({"method": "ars", "top": 1.5}, TypeError, "top=1.5 must be an integer or None, not float"),
    ({"method": "sepcma", "mu": 2.5}, TypeError, "mu=2.5 must be an integer or None"),
    ({"method": "sepcma", "pairwise": "no"}, TypeError, "pairwise='no' must be True or False"),
    ({"method": "pgpe", "center_lr": "a"}, TypeError, "center_lr='a' must be a finite number"),
    ({"method": "snes", "mirrored": 1}, TypeError, "mirrored=1 must be True or False"),
    # ... and of the right type, out of range: the strategy's own check.
    ({"method": "openai", "lr": -1.0}, ValueError, "lr -1.0: must be > 0"),
    ({"method": "openai", "lr": 0}, ValueError, "lr 0: must be > 0"),
    ({"method": "openai", "l2": -1.0}, ValueError, "l2 -1.0: must be >= 0"),
    ({"method": "ars", "lr_min": -1.0}, ValueError, "lr_min -1.0: must be >= 0"),
    ({"method": "openai", "fitness_shaping": "ranks"}, TypeError,
     "fitness_shaping 'ranks': must be a function of the fitness array"),
    ({"method": "pgpe", "optimizer": "sgd"}, ValueError, "optimizer 'sgd': allowed are"),
    ({"fun": 3}, TypeError, "fun 3: must be callable"),
    ({"callback": lambda: None}, ValueError,  # a TypeError after the first generation
     "callback <lambda>(): must take one argument, a history row"),
])
def test_bad_arguments_are_one_line_errors_naming_them(kwargs, error, fragment):
    call = {"fun": never_called, "x0": np.zeros(3), "sigma0": 0.5, **kwargs}
    one_line_error(error, lambda: es.minimize(**call), fragment)


def test_pgpe_takes_its_optimizer_by_name_and_numpy_numbers_as_keywords():
    adam = es.minimize(SPHERE, np.ones(3), 0.5, method="pgpe", optimizer="adam",
                       max_generations=5)
    clipup = es.minimize(SPHERE, np.ones(3), 0.5, method="pgpe", max_generations=5)
    assert not np.array_equal(adam.x_mean, clipup.x_mean)
    as_numpy = es.minimize(SPHERE, np.ones(3), 0.5, method="ars", top=np.int64(2),
                           lr=np.float32(0.05), max_generations=5)
    as_python = es.minimize(SPHERE, np.ones(3), 0.5, method="ars", top=2,
                            lr=float(np.float32(0.05)), max_generations=5)
    assert np.array_equal(as_numpy.x_mean, as_python.x_mean)


def test_a_function_that_cannot_reach_the_workers_is_named():
    import threading

    lock = threading.Lock()
    one_line_error(TypeError, lambda: es.minimize(lambda x: (lock, SPHERE(x))[1], np.ones(3),
                                                  0.5, max_evals=50, workers=2),
                   "workers=2: fun cannot be sent to the worker processes",
                   "cannot pickle '_thread.lock' object", "workers=1")


@pytest.mark.parametrize("vectorized", [False, True])
def test_a_function_that_writes_into_its_x_minimizes_as_one_that_does_not(vectorized):
    """It failed with "tell() got other points than ask() returned", a call the user never
    made: the candidates evaluated were the ones told."""
    def zeroing(x):
        value = SPHERE(x)
        x[...] = 0
        return value

    kwargs = {"method": "snes", "seed": 1, "max_evals": 400, "vectorized": vectorized}
    assert es.minimize(zeroing, np.ones(3), 0.5, **kwargs).x.tolist() == es.minimize(
        SPHERE, np.ones(3), 0.5, **kwargs).x.tolist()


def test_tell_refuses_xs_that_are_not_points_and_takes_nan_candidates_back():
    opt = es.AskTell("snes", np.ones(3), 0.5, popsize=4)
    opt.ask()
    one_line_error(TypeError, lambda: opt.tell("abc", [1.0] * 4),
                   "tell() got xs 'abc': must be the candidates ask() returned")
    opt._pending[0, 0] = np.nan  # as a strategy whose step overflowed would ask
    opt.tell(opt.ask(), [1.0] * 4)  # the same points back: NaN equals NaN here
    # ask()'s points as float32, as pycma users pass them: refused, and told why.
    opt = es.AskTell("snes", np.ones(3), 0.5, popsize=4)
    xs = opt.ask()
    one_line_error(ValueError, lambda: opt.tell(xs.astype(np.float32), [1.0] * 4),
                   "tell() got other points than ask() returned: ask()'s, rounded to float32; "
                   "pass back the float64 array ask() returned")
    one_line_error(ValueError, lambda: opt.tell(xs + 1, [1.0] * 4),
                   "tell() got other points than ask() returned")


def test_budgets_may_be_written_as_floats():
    assert es.minimize(SPHERE, np.ones(3), 0.5, max_evals=1e2, tolfun=None).nfev == 105


@pytest.mark.parametrize(("fun", "vectorized", "fragments"), [
    (lambda x: None, False, ["fun returned None (NoneType) at x = [", "generation 1"]),
    (lambda x: "1.5", False, ["fun returned '1.5' (str)", "generation 1"]),
    (lambda rows: None, True, ["vectorized fun returned None", "for 8 rows"]),
    (lambda rows: [None] * len(rows), True, ["returned [None, None", "a number per row"]),
    (lambda x: True, False, ["fun returned True (bool)"]),  # float() took it as 1.0
    (lambda rows: rows[:, 0] > 0, True, ["vectorized fun returned [", "a number per row"]),
    # float() raised a bare OverflowError on it.
    (lambda x: 10**400, False, ["fun returned 1000", "(int) at x = [", "within float64's "
                                "range", "generation 1"]),
])
def test_a_function_value_that_is_not_a_number_is_named(fun, vectorized, fragments):
    one_line_error(FunctionValueError, lambda: es.minimize(fun, np.ones(3), 0.5, popsize=8,
                                                           vectorized=vectorized), *fragments)
    assert issubclass(FunctionValueError, TypeError)


def test_tell_names_a_value_that_is_not_a_number():
    opt = es.AskTell("cma", np.zeros(3), 0.5, popsize=4)
    xs = opt.ask()
    one_line_error(FunctionValueError, lambda: opt.tell(xs, [1.0, 2.0, None, 3.0]),
                   "tell() got None (NoneType) as value 2")
    one_line_error(FunctionValueError, lambda: opt.tell(xs, [True] * 4),
                   "tell() got True (bool) as value 0")
    one_line_error(TypeError, lambda: opt.tell(xs, map(SPHERE, xs)),
                   "tell() got values as map (an iterator): pass a list or an array")
    one_line_error(FunctionValueError, lambda: opt.tell(xs, [1.0, 10**400, 2.0, 3.0]),
                   "tell() got 1000", "(int) as value 1: values must be numbers within "
                   "float64's range")
    opt.tell(xs, [1.0, 2.0, np.nan, 3.0])  # NaN is a failed evaluation, ranked last
    # Told twice: it said "tell() without ask()" to a user who had asked.
    one_line_error(RuntimeError, lambda: opt.tell(xs, [1.0] * 4),
                   "tell() again: generation 1's values were told already")


def test_ask_after_the_last_run_ended_is_refused_before_anything_is_evaluated():
    """It returned candidates whose values tell() then refused ("the restarts are spent")."""
    opt = es.AskTell("snes", np.ones(2), 0.5, tolx=1e-3)
    while not opt.stop():
        xs = opt.ask()
        opt.tell(xs, [SPHERE(x) for x in xs])
    one_line_error(RuntimeError, opt.ask, "ask() after the last run ended (tolx")


def test_sigma0_may_be_a_zero_dimensional_array_as_x0_may():
    assert es.minimize(SPHERE, np.ones(3), np.array(0.5), max_evals=100).nfev == 105


# ---- restart populations, as docs/python-api.md states them ------------------------------------

@pytest.mark.parametrize(("method", "dim", "popsize", "expected"), [
    ("cma", 2, None, [6, 12, 24, 48, 97]),       # cma.fmin's: the unrounded 6.08 doubled
    ("snes", 5, None, [8, 16, 32, 64, 128]),     # mirrored: floor(8.83) = 8, even, doubled
    ("sepcma", 7, None, [10, 20, 40, 80, 160]),  # floor(9.84) = 9 made even: 10, doubled
    ("snes", 5, 6, [6, 12, 24, 48, 96]),         # the user's, doubled
])
def test_restart_populations_double_as_documented(method, dim, popsize, expected):
    flat = es.minimize(lambda x: 1.0, np.zeros(dim), 0.5, method=method, popsize=popsize,
                       restarts=4)  # a flat function: every run stops after one generation
    assert [row["population"] for row in flat.history] == expected
    assert flat.restarts == 4


# ---- Result's repr and dir(es) -------------------------------------------------------------------

def test_result_repr_is_a_short_summary_whatever_the_history():
    history = [{"ngen": i, "nfev": 10 * i, "best_f": 1.0 / i} for i in range(1, 5001)]
    result = Result(np.arange(1000.0), 0.125, 50_000, 5000, "tolfun", np.zeros(1000), history,
                    "sepcma", 2)
    text = repr(result)
    assert len(text) < 800 and text == str(result)
    for fragment in ("method: 'sepcma'", "stop_reason: 'tolfun'", "fun: 0.125",
                     "nfev: 50000", "ngen: 5000", "restarts: 2", "history: 5000 rows",
                     "x: [ 0., 1., 2., ..., 997., 998., 999.]"):
        assert fragment in text, (fragment, text)
    small = repr(es.minimize(SPHERE, np.ones(3), 0.5, max_generations=2))
    assert "x: [" in small and "..." not in small and "history: 2 rows" in small


def test_dir_es_lists_the_lazy_api_without_loading_it():
    assert {"minimize", "AskTell", "Result", "train", "functions"} <= set(dir(es))
    code = ("import sys, es; names = dir(es); "
            "assert 'minimize' in names and 'AskTell' in names, names; "
            "assert 'numpy' not in sys.modules and 'es.blackbox' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_population_pycma_has_no_memory_for_is_named(monkeypatch):
    """popsize=10**9 (6 GiB of address space) said "cma options {}: pycma could not start
    with them (MemoryError:)" after 91 s, naming options that were not given. The memory
    is not exhausted here: pycma's constructor raises as it did."""
    import cma

    def out_of_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(cma, "CMAEvolutionStrategy", out_of_memory)
    one_line_error(ValueError, lambda: es.minimize(never_called, np.ones(3), 0.5,
                                                   popsize=10**9, max_generations=1),
                   "popsize 1000000000: pycma ran out of memory starting with a population "
                   "this large (d = 3)")
    # Many parameters, a small population: the covariance, which es-train blamed on popsize 4.
    one_line_error(ValueError, lambda: es.minimize(never_called, np.ones(200_000), 0.5,
                                                   method="cma", popsize=4,
                                                   max_generations=1),
                   "pycma ran out of memory starting: full CMA-ES keeps a d x d covariance, "
                   "298 GiB for d = 200000 parameters; for this many use sepcma, its diagonal "
                   "form")


def test_masked_values_count_as_failed_evaluations_with_a_warning():
    """np.asarray dropped the mask: the value under a masked entry counted, here as the
    best of the generation."""
    opt = es.AskTell("snes", np.ones(3), 0.5, seed=0, popsize=4)
    xs = opt.ask()
    with pytest.warns(UserWarning, match=r"^tell\(\): 1 masked value counts as failed "
                                         r"evaluations \(NaN\)$"):
        opt.tell(xs, np.ma.masked_array([-5.0, 1.0, 2.0, 3.0], mask=[1, 0, 0, 0]))
    assert opt.best_f == 1.0

    def masked_first(rows):
        return np.ma.masked_array(SPHERE(rows), mask=np.arange(len(rows)) == 0)

    with pytest.warns(UserWarning, match="vectorized fun: 1 masked value counts as failed"):
        masked = es.minimize(masked_first, np.ones(3), 0.5, method="cma", seed=1, vectorized=True,
                             popsize=4, max_generations=1)
    told = es.AskTell("cma", np.ones(3), 0.5, seed=1, popsize=4, max_generations=1)
    rows = told.ask()
    told.tell(rows, [np.nan, *SPHERE(rows[1:])])
    assert masked.fun == told.best_f


def test_a_shallow_copy_of_an_optimizer_goes_on_alone():
    """copy.copy shared the strategy: telling the copy and the original told it each
    generation twice, without a word, and both went wrong."""
    import copy

    def generation(opt):
        xs = opt.ask()
        opt.tell(xs, [SPHERE(x) for x in xs])

    for method in ("snes", "cma"):
        first, alone = (es.AskTell(method, np.ones(3), 0.5, seed=0) for _ in range(2))
        for _ in range(3):
            generation(first)
            generation(alone)
        fork = copy.copy(first)
        for opt in (first, fork, alone):
            generation(opt)
        assert np.array_equal(first.mean, alone.mean) and np.array_equal(fork.mean, alone.mean)
        xs = first.ask()  # between ask() and tell(): the fork is told the same candidates
        fork = copy.copy(first)
        first.tell(xs, [SPHERE(x) for x in xs])
        fork.tell(xs, [SPHERE(x) for x in xs])
        generation(alone)
        assert np.array_equal(first.mean, alone.mean) and np.array_equal(fork.mean, alone.mean)
