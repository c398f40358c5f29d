"""What every ``es-*`` program shares about bad command lines: one line on stderr, exit 2.

argparse prints a usage block before its error; a user (or a script reading stderr) gets the
message alone here, with a pointer to ``--help``. Messages echo what the user typed, so line
breaks inside them are escaped: an error is always exactly one line.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

USAGE_ERROR = 2
# Every character str.splitlines() breaks at, written as its escape instead.
_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def one_line(text: str) -> str:
    """``text`` with its line breaks escaped (``\\n``), so it prints as one line."""
    return text.translate(_LINE_BREAKS)


def fail(program: str, message: str) -> int:
    """Print ``program: error: message`` as one line on stderr; returns the exit code 2."""
    print(f"{program}: error: {one_line(message)}", file=sys.stderr, flush=True)
    return USAGE_ERROR


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line: ``prog: error: ...``, exit 2.

    Sub-command parsers (``add_subparsers``) are of this class too.
    """

    def error(self, message: str) -> NoReturn:
        fail(self.prog, f"{message} (see {self.prog} --help)")
        raise SystemExit(USAGE_ERROR)
