"""minimark: a small, dependency-free Markdown to HTML renderer.

>>> import minimark
>>> minimark.markdown("Hello *world*")
'<p>Hello <em>world</em></p>\\n'
"""

from .blocks import BlockParser, parse
from .escape import escape_html, normalize_url
from .inline import parse_inline
from .nodes import plain_text, to_dict
from .renderer import HtmlRenderer, render_html
from .toc import Slugger, TocEntry, build_toc, nest_toc, render_toc, slugify

__all__ = [
    "BlockParser", "HtmlRenderer", "Slugger", "TocEntry", "build_toc", "escape_html",
    "markdown", "nest_toc", "normalize_url", "parse", "parse_inline", "plain_text",
    "render_html", "render_toc", "slugify", "to_dict",
]

__version__ = "0.1.0"


def markdown(text: str, *, heading_ids: bool = False, softbreak: str = "\n") -> str:
    """Convert Markdown *text* to an HTML string."""
    return render_html(parse(text), heading_ids=heading_ids, softbreak=softbreak)
