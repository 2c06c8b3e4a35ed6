"""AST node classes produced by the block and inline parsers.

Every node has a ``type`` name and, for container nodes, a ``children``
list.  Nodes compare by identity; use :func:`to_dict` to get a plain
structure that is convenient to compare in tests.
"""

from __future__ import annotations


class Node:
    """Base class of all AST nodes."""

    type = "node"
    fields: tuple[str, ...] = ()

    def __init__(self, children: list["Node"] | None = None) -> None:
        self.children: list[Node] = list(children or [])

    def __repr__(self) -> str:
        attrs = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.fields)
        if self.children:
            attrs = (attrs + ", " if attrs else "") + f"children={self.children!r}"
        return f"{type(self).__name__}({attrs})"

    def walk(self):
        """Yield this node and all of its descendants, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


# -- block nodes -----------------------------------------------------------

class Document(Node):
    type = "document"


class Paragraph(Node):
    type = "paragraph"


class Heading(Node):
    type = "heading"
    fields = ("level",)

    def __init__(self, level: int, children=None) -> None:
        super().__init__(children)
        self.level = level
        #: Raw inline source of the heading, before inline parsing.
        self.source = ""


class CodeBlock(Node):
    type = "code_block"
    fields = ("info", "code")

    def __init__(self, code: str, info: str = "") -> None:
        super().__init__()
        self.code = code
        self.info = info


class BlockQuote(Node):
    type = "block_quote"


class List(Node):
    type = "list"
    fields = ("ordered", "start", "tight")

    def __init__(self, ordered: bool, start: int | None, tight: bool, children=None) -> None:
        super().__init__(children)
        self.ordered = ordered
        self.start = start
        self.tight = tight


class ListItem(Node):
    type = "list_item"


class ThematicBreak(Node):
    type = "thematic_break"


# -- inline nodes ----------------------------------------------------------

class Text(Node):
    type = "text"
    fields = ("text",)

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class CodeSpan(Node):
    type = "code_span"
    fields = ("code",)

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code


class Emphasis(Node):
    type = "emphasis"


class Strong(Node):
    type = "strong"


class Link(Node):
    type = "link"
    fields = ("url", "title")

    def __init__(self, url: str, title: str | None = None, children=None) -> None:
        super().__init__(children)
        self.url = url
        self.title = title


class Image(Node):
    type = "image"
    fields = ("url", "title")

    def __init__(self, url: str, title: str | None = None, children=None) -> None:
        super().__init__(children)
        self.url = url
        self.title = title


class AutoLink(Node):
    type = "autolink"
    fields = ("url", "email")

    def __init__(self, url: str, email: bool = False) -> None:
        super().__init__()
        self.url = url
        self.email = email


class SoftBreak(Node):
    type = "softbreak"


class LineBreak(Node):
    type = "linebreak"


def plain_text(nodes: list[Node]) -> str:
    """Return the text content of a list of inline nodes, without markup."""
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            parts.append(node.text)
        elif isinstance(node, CodeSpan):
            parts.append(node.code)
        elif isinstance(node, AutoLink):
            parts.append(node.url)
        elif isinstance(node, (SoftBreak, LineBreak)):
            parts.append(" ")
        else:
            parts.append(plain_text(node.children))
    return "".join(parts)


def to_dict(node: Node) -> dict:
    """Convert a node tree to nested dictionaries (handy for debugging)."""
    data: dict = {"type": node.type}
    for field in node.fields:
        data[field] = getattr(node, field)
    if node.children:
        data["children"] = [to_dict(child) for child in node.children]
    return data
