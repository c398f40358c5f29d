"""``es-plot``: learning curves from run folders, seeds of one configuration as mean ± std.

    es-plot runs/pendulum__* --figure pendulum.png
    es-plot runs/pong30 --x time_s --y eval_return -o pong.svg

How runs are grouped and averaged: ``es.bench.curves``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from es.bench.curves import X_COLUMNS, Y_COLUMNS, plot
from es.cli.args import ArgumentParser, fail


def parser() -> ArgumentParser:
    parse = ArgumentParser(prog="es-plot", description=__doc__.splitlines()[0],
                           examples=["es-plot runs/Pendulum-v1__pendulum__* --figure pendulum.png",
                                     "es-plot runs/pong30 --x time_s --y eval_return -o pong.svg",
                                     "es-plot runs/hc__* -o hc.pdf --log-x --title HalfCheetah"])
    parse.add_argument("run_dirs", nargs="+", type=Path, help="run folders written by es-train")
    parse.add_argument("-o", "--figure", type=Path, required=True, metavar="PATH",
                       help="the image file to write (.png, .svg or .pdf)")
    parse.add_argument("--x", choices=X_COLUMNS, default="timesteps")
    parse.add_argument("--y", choices=Y_COLUMNS, default="eval_return")
    parse.add_argument("--title")
    parse.add_argument("--log-x", action="store_true",
                       help="logarithmic x axis (learning that happens early in a long run)")
    return parse


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.figure.suffix.lower() not in (".png", ".svg", ".pdf"):
        return fail("es-plot", f"--figure {str(args.figure)!r}: allowed suffixes are .png, "
                    ".svg, .pdf")
    try:
        groups = plot(args.run_dirs, args.figure, args.x, args.y, args.title, args.log_x)
    except (ValueError, RuntimeError, OSError, KeyError) as error:
        return fail("es-plot", str(error))
    print(f"wrote {args.figure} ({groups} group{'s' if groups != 1 else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
