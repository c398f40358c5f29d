"""One-line messages: every user error in ``es`` (a config key, a flag, a file) is one line.

A message may quote what the user typed, line breaks included; written as escapes instead,
the message stays one line on stderr and in a one-line ``ValueError``.
"""

from __future__ import annotations

# Every character str.splitlines() breaks at, written as its escape instead.
_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def one_line(text: str) -> str:
    """``text`` with its line breaks escaped (``\\n``), so it prints as one line."""
    return text.translate(_LINE_BREAKS)
