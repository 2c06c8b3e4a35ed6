"""cronparse: parse, validate, describe and schedule 5-field cron expressions."""

from .describe import describe
from .errors import CronError, CronSyntaxError, NoFireTimeError
from .expression import ALIASES, CronExpression, is_valid, parse, validate
from .fields import DAY_OF_MONTH, DAY_OF_WEEK, FIELDS, HOUR, MINUTE, MONTH, FieldSpec, parse_field
from .schedule import DEFAULT_HORIZON_YEARS, iter_fires, next_fire, next_fires, prev_fire
from .timeutil import days_in_month, is_leap_year

__version__ = "0.1.0"

__all__ = [
    "ALIASES",
    "CronError",
    "CronExpression",
    "CronSyntaxError",
    "DAY_OF_MONTH",
    "DAY_OF_WEEK",
    "DEFAULT_HORIZON_YEARS",
    "FIELDS",
    "FieldSpec",
    "HOUR",
    "MINUTE",
    "MONTH",
    "NoFireTimeError",
    "days_in_month",
    "describe",
    "is_leap_year",
    "is_valid",
    "iter_fires",
    "next_fire",
    "next_fires",
    "parse",
    "parse_field",
    "prev_fire",
    "validate",
]
