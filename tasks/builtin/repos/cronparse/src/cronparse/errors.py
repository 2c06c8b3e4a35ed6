"""Exception types raised by cronparse."""

from __future__ import annotations

from typing import Optional


class CronError(ValueError):
    """Base class for all cronparse errors."""


class CronSyntaxError(CronError):
    """An expression (or one of its fields) is malformed or out of range.

    Attributes:
        reason: what is wrong, e.g. ``"value 61 out of range (0-59)"``.
        field: the field name (``"minute"``, ``"day-of-week"``...) or None.
        text: the offending field text, or the whole expression.
        expression: the whole expression, when known.
    """

    def __init__(
        self,
        reason: str,
        field: Optional[str] = None,
        text: Optional[str] = None,
        expression: Optional[str] = None,
    ) -> None:
        self.reason = reason
        self.field = field
        self.text = text
        self.expression = expression
        super().__init__(self._format())

    def _format(self) -> str:
        if self.field is not None:
            message = f"invalid {self.field} field {self.text!r}: {self.reason}"
        else:
            message = self.reason
        if self.expression is not None:
            message += f" in {self.expression!r}"
        return message

    def with_expression(self, expression: str) -> "CronSyntaxError":
        """Return a copy of this error that also names the whole expression."""
        return CronSyntaxError(self.reason, self.field, self.text, expression)


class NoFireTimeError(CronError):
    """No fire time exists within the search horizon."""
