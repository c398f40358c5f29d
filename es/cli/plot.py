"""``es-plot``: learning curves from run folders, the seeds of one config as mean ± std.

    es-plot runs/pendulum__* --figure pendulum.png
    es-plot runs/pong30 --x time_s --y eval_return -o pong.svg

Which runs are the seeds of one config, their labels and how unequal seeds are averaged:
``es.bench.curves`` (es-compare draws with it too).
"""

from __future__ import annotations

import sys
from pathlib import Path

from es.bench.curves import X_COLUMNS, Y_COLUMNS, plot, runs_to_draw
from es.cli.args import (
    ArgumentParser,
    fail,
    interruptible,
    output_file_error,
    survive_closed_stdout,
)
from es.core.messages import one_line


def parser() -> ArgumentParser:
    parse = ArgumentParser(
        prog="es-plot",
        description="Learning curves from run folders: the seeds of one config as mean ± std "
        "(solid where every seed counts, dotted where only the longer runs do).",
        examples=["es-plot runs/Pendulum-v1__pendulum__* --figure pendulum.png",
                  "es-plot runs/pong30 --x time_s --y eval_return -o pong.svg",
                  "es-plot runs/hc__* -o hc.pdf --log-x --title HalfCheetah"])
    parse.add_argument(
        "run_dirs", nargs="+", type=Path,
        help="run folders written by es-train or es-baseline, or a folder holding runs (a "
        "sweep's, or runs/: every run under it); a run not yet evaluated, or one whose files "
        "cannot be read (a value that is not a number), is left out, with a "
        "line. Runs whose config.toml differ "
        "only in run.seed and in [run] keys that do not change what is trained (budgets such "
        "as run.generations, run.max_timesteps, run.max_seconds; evaluation; bookkeeping) "
        "are the seeds of one config, one curve; a seed given twice is drawn as separate "
        "runs; groups of one env and run name are labelled with the keys they differ in")
    parse.add_argument("-o", "--figure", type=Path, required=True, metavar="PATH",
                       help="the image file to write (.png, .svg or .pdf)")
    parse.add_argument("--x", choices=X_COLUMNS, default="timesteps")
    parse.add_argument("--y", choices=Y_COLUMNS, default="eval_return")
    parse.add_argument("--title")
    parse.add_argument("--log-x", action="store_true",
                       help="logarithmic x axis (learning that happens early in a long run)")
    return parse


@interruptible("es-plot")
def main(argv: list[str] | None = None) -> int:
    survive_closed_stdout()
    args = parser().parse_args(argv)
    if args.figure.suffix.lower() not in (".png", ".svg", ".pdf"):
        return fail("es-plot", f"--figure {str(args.figure)!r}: allowed suffixes are .png, "
                    ".svg, .pdf")
    if problem := output_file_error(str(args.figure), "--figure", ".png"):  # before any run is read
        return fail("es-plot", problem)
    try:
        run_dirs, left_out = runs_to_draw(args.run_dirs, args.x, args.y)
        for line in left_out:
            print(f"es-plot: {one_line(line)}", file=sys.stderr)
        labels = plot(run_dirs, args.figure, args.x, args.y, args.title, args.log_x)
    except (ValueError, RuntimeError, OSError) as error:
        return fail("es-plot", str(error))
    print(f"wrote {one_line(str(args.figure))} ({len(labels)} "
          f"group{'s' if len(labels) != 1 else ''})")
    for label in labels:
        print(f"  {one_line(label)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
