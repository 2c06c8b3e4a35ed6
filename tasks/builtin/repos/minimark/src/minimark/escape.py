"""HTML and URL escaping helpers."""

from __future__ import annotations

import re
from urllib.parse import quote

#: ASCII punctuation characters that may be backslash-escaped.
ESCAPABLE = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

_BACKSLASH_RE = re.compile(r"\\([" + re.escape(ESCAPABLE) + r"])")

# Characters that are left untouched when normalising a URL.  ``%`` is kept
# so that already percent-encoded URLs are not encoded twice.
_URL_SAFE = ";/?:@&=+$,-_.!~*'()#%"


def escape_html(text: str, quote_attr: bool = True) -> str:
    """Escape ``&``, ``<``, ``>`` (and ``"`` when *quote_attr* is true)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if quote_attr:
        text = text.replace('"', "&quot;")
    return text


def unescape_backslashes(text: str) -> str:
    """Remove backslashes in front of escapable ASCII punctuation."""
    return _BACKSLASH_RE.sub(r"\1", text)


def normalize_url(url: str) -> str:
    """Percent-encode characters that are not allowed in a URL.

    Existing ``%XX`` sequences, reserved characters and ASCII letters and
    digits are preserved; spaces and non-ASCII characters are encoded as
    UTF-8 percent escapes.  The result is *not* HTML-escaped; callers that
    put it into an attribute must escape it themselves.
    """
    return quote(url, safe=_URL_SAFE)
