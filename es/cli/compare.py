"""``es-compare``: ES against the baselines on one env, equal wall-clock budgets, same seeds.

    es-compare --env CartPole-v1 --budget-s 120 --seeds 0-2
    es-compare --env Pendulum-v1 --budget-s 120 --seeds 0-2    # continuous: no DQN

The runs and what they write: ``es.bench.compare``.
"""

from __future__ import annotations

import sys

from es.cli.args import (
    ArgumentParser,
    SpecError,
    add_flag,
    add_out,
    add_ranks,
    fail,
    name_list,
    parse_seconds,
    positive_int,
    survive_closed_stdout,
)


def run_budget(text: str) -> float:
    """``--budget-s``: seconds >= 1, refused in the parser's words as 0 is (0.5 passed the
    parser and was refused later, with another minimum than --help gave)."""
    try:
        value = parse_seconds(text)
    except SpecError:  # "abc", 0, inf: the same minimum said
        value = 0.0
    if value < 1:
        raise SpecError(f"{text!r}: expected a finite number of seconds >= 1 (a run's budget "
                        "counts from its process's start, which alone takes about a second)")
    return value


run_budget.flag_kind = parse_seconds  # type: ignore[attr-defined]  # narrower; alike in kind


def parser() -> ArgumentParser:
    from es.bench.compare import METHODS, THRESHOLDS

    parse = ArgumentParser(
        prog="es-compare",
        description="ES against the baselines on one env: equal wall-clock budgets, the same "
        "seeds.",
        examples=["es-compare --env CartPole-v1 --budget-s 120 --seeds 0-2",
                  "es-compare --env Pendulum-v1 --methods es,pg --ranks 2 --jobs 2",
                  "es-compare --env Acrobot-v1 --method-config es=configs/cartpole.toml "
                  "--threshold -100"])
    add_flag(parse, "--env", required=True)
    add_flag(parse, "--budget-s", "every run's, counted from process start, >= 1",
             default=120.0, type=run_budget)
    add_flag(parse, "--seeds", "one run per method and seed", default="0-2")
    add_flag(parse, "--methods", "a subset of es,pg,ppo,dqn (default: all; dqn needs discrete "
             "actions and is left out on other envs unless named)", type=name_list(METHODS))
    parse.add_argument("--method-config", action="append", default=[], metavar="METHOD=PATH",
                       help="the config of one method, trained on --env whatever env it names "
                       "(default: the shipped one for the env)")
    add_ranks(parse, "1", several=False, detail="for es, pg and ppo (dqn is one process)")
    add_flag(parse, "--jobs", "each run with --ranks ranks")
    add_flag(parse, "--threshold", "default: the env's usual one, "
             f"{', '.join(f'{env} {value:g}' for env, value in THRESHOLDS.items())}")
    parse.add_argument("--eval-episodes", type=positive_int, default=20,
                       help="episodes of each run's final policy (default 20)")
    add_flag(parse, "--force", "replace the runs of an earlier es-compare in --out")
    add_out(parse, "compare", per="ENV")
    return parse


def main(argv: list[str] | None = None) -> int:
    survive_closed_stdout()
    from es.bench.compare import compare

    args = parser().parse_args(argv)
    try:
        return compare(args)
    except ValueError as error:
        return fail("es-compare", str(error))


if __name__ == "__main__":
    sys.exit(main())
