"""One-line messages: every user error in ``es`` (a config key, a flag, a file) is one line.

A message may quote what the user typed, line breaks included; written as escapes instead,
the message stays one line on stderr and in a one-line ``ValueError``.
"""

from __future__ import annotations

import inspect

# Every character str.splitlines() breaks at, written as its escape instead.
_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def one_line(text: str) -> str:
    """``text`` with its line breaks escaped (``\\n``), so it prints as one line."""
    return text.translate(_LINE_BREAKS)


def callback_error(callback: object, row: str) -> str | None:
    """What is wrong with a user's ``callback`` of one ``row`` (a progress or history row),
    or None: a function of no argument, or of two, raised its TypeError only after the first
    generation had been trained. One without a signature (some builtins) is left to its
    call."""
    if callback is None:
        return None
    if not callable(callback):
        return f"callback {callback!r}: must be callable with {row}"
    try:
        signature = inspect.signature(callback)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(None)
    except TypeError:
        name = getattr(callback, "__name__", repr(callback))
        return f"callback {name}{signature}: must take one argument, {row}"
    return None
