"""Backend-provided text made safe for every format a report is written in.

A backend controls its name, version and every error message; a report is published
(a pull-request comment, an HTML page, a CI test view). So before any renderer uses such
a string: lone surrogates, control characters (ANSI escape sequences included), bidirectional
controls and Unicode line separators are replaced, lengths are capped with a note, and each
format escapes what it interprets: Markdown its inline syntax and raw HTML, XML the characters
XML 1.0 cannot hold.
"""

from __future__ import annotations

import re
from typing import Any

MAX_TEXT = 4000
"""Longest backend string a report renders; report.json keeps what the transport kept."""
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_INVISIBLE = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
"""Characters that change how the text around them reads without showing themselves: bidirectional
controls (U+202E makes what follows read right to left, so a file name or a verdict can be shown
reversed) and the Unicode line and paragraph separators (U+2028 breaks a line where Markdown,
a JUnit viewer or a terminal sees none)."""
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def plain(value: Any, limit: int = MAX_TEXT) -> str:
    """``value`` as printable text: no surrogates, no control characters but newline and tab, no
    bidirectional controls or Unicode line separators, capped."""
    text = "" if value is None else str(value)
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates become "?"
    text = _ANSI.sub("", text)
    text = _CONTROL.sub("\ufffd", text)
    text = _INVISIBLE.sub("\ufffd", text)
    if len(text) > limit:
        text = f"{text[:limit]}... [{len(text) - limit} more characters]"
    return text


def markdown(value: Any, limit: int = MAX_TEXT) -> str:
    """Inline Markdown that renders as the literal text: no raw HTML, no links, no table breaks."""
    text = plain(value, limit).replace("\r", " ").replace("\n", " ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(r"\\\1", text)


def code(value: Any, limit: int = MAX_TEXT) -> str:
    """Text for inside a Markdown code span (rendered literally): no backticks, no line breaks."""
    return plain(value, limit).replace("`", "'").replace("\r", " ").replace("\n", " ")


def xml(text: str) -> str:
    """A serialized XML document with every character XML 1.0 refuses replaced."""
    return _XML_INVALID.sub("\ufffd", text)
