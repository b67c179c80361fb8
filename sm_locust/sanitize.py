"""The one sanitiser for text that came from an endpoint or a file, before a terminal, a log or a page.

Why: an endpoint's error message, a name in a payload or mix file, a value in a sweep file are
untrusted. Printed raw, `ESC ] 0 ; title BEL` renames the user's terminal, `ESC ] 52 ; c ; ...`
writes their clipboard, `ESC [ 2 J` clears the screen, and a bidi override (U+202E) makes a line
read other than it is; a 4-million-character value made one stderr "line" of 4.3 million characters.
Round 4 found a ModelError message reaching the terminal from `sm-locust run`'s closing line.

`clean(text)` makes such text inert and short: every control character a terminal acts on (C0 but
tab, DEL, C1, which includes the 8-bit CSI 0x9b and OSC 0x9d) and every bidi embedding, override,
isolate and mark is replaced by its visible escape (`\\x1b`, `\\u202e`, as Python's repr writes
them), so an escape sequence cannot start and the reader still sees that something was there;
newlines become `\\n` unless the text may be several lines (`newlines=True`); the result is at most
`limit` characters, the cut marked with an ellipsis. `page_text` is `clean` then HTML-escaped, for
report pages. Plain text (ASCII letters, punctuation, any printable Unicode) passes unchanged.

It sits at the package root, beside `errors.py`, because every `SmLocustError` message goes through it
(`sm_locust.util` imports `errors`, so a home there would close a cycle); it imports nothing.
"""

from __future__ import annotations

import html
import re

MAX_LINE = 1000  # an error line, a failure text in a closing line: long enough for any message of ours
ELLIPSIS = "…"

# C0 (but tab and newline, handled below), DEL, C1 (0x80-0x9f: 8-bit CSI, OSC, ST, ...), the bidi
# controls (LRM, RLM, ALM, LRE..RLO, LRI..PDI) and the line/paragraph separators some terminals honour.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NEWLINE = re.compile("\r\n|\n")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: object, limit: int | None = MAX_LINE, *, newlines: bool = False) -> str:
    """`text` (any object, as `str`) with every terminal control and bidi control escaped, newlines kept
    only with `newlines=True` (else written `\\n`), and at most `limit` characters (None: no bound),
    cut with an ellipsis."""
    value = text if isinstance(text, str) else str(text)
    if limit is not None and len(value) > 4 * limit + 16:  # escaping at most quadruples a character
        value = value[:4 * limit + 16]
    if newlines:
        value = "\n".join(_UNSAFE.sub(_escape, part) for part in _NEWLINE.split(value))
    else:
        value = _UNSAFE.sub(_escape, _NEWLINE.sub("\\\\n", value))
    if limit is not None and len(value) > limit:
        value = value[:max(0, limit - len(ELLIPSIS))] + ELLIPSIS
    return value


def page_text(text: object, limit: int | None = MAX_LINE) -> str:
    """`clean(text, limit)`, HTML-escaped: a value from an endpoint or a file, for a report page."""
    return html.escape(clean(text, limit))


# A terminal stream keeps what a progress line of ours writes (a carriage return, ESC [ K: erase to the end of
# the line) and escapes every other control, as `clean` does.
_STREAM_UNSAFE = re.compile("\x1b(?!\\[K)|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f\u061c\u200e\u200f"
                            "\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class TerminalStream:
    """A text stream (stdout, stderr) that escapes terminal controls in everything written to it: a name
    the command echoes (a run folder `run<ESC>]0;title<BEL>`, a sweep file's value) stays inert wherever
    it is printed. Anything else is the wrapped stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_STREAM_UNSAFE.sub(_escape, text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def is_clean(text: str) -> bool:
    """True when `text` holds no character `clean` would escape (tests, and callers that only check)."""
    return _UNSAFE.search(text.replace("\n", "")) is None
