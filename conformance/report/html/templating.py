"""The Jinja2 templates every HTML page is rendered from (``conformance/report/templates``), with
autoescape and every printed value made plain text first (``safe.plain``)."""

from __future__ import annotations

import functools
import re
from typing import Any

import jinja2
from markupsafe import Markup

from conformance.report import safe
from conformance.report.html.style import chip_style, colour_of, glyph_of, label_of, tint_style

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
"""No script, no network: only the inline styles and inline SVG of the page itself."""

INTEGRITY_META = "conformance-report-sha256"
INTEGRITY = re.compile(rf'<meta name="{INTEGRITY_META}" content="([0-9a-f]{{64}})">')


def _text(value: Any) -> Any:
    """What every ``{{ value }}`` prints, before autoescape: printable text, capped (``safe.plain``);
    markup a template made itself (a macro's ``caller()``) passes as it is."""
    return value if isinstance(value, Markup) else safe.plain(value)


@functools.cache
def environment() -> jinja2.Environment:
    """The templates of every HTML rendering, loaded once per process."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("conformance.report", "templates"),
        autoescape=True,  # every template here is HTML
        undefined=jinja2.StrictUndefined,
        finalize=_text,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(chip_style=chip_style, tint_style=tint_style, colour=colour_of, glyph=glyph_of, label=label_of)
    env.globals.update(CSP=CSP, INTEGRITY_META=INTEGRITY_META)
    return env


def render_template(name: str, **view: Any) -> str:
    return environment().get_template(name).render(**view)
