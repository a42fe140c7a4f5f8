"""What a database error means for the caller, for the API's one error mapping.

Requests are validated before they reach the store (`cobalt.shared.contracts.bounds`),
so these are the few errors only the database can see: a row written by someone else in
the meantime (a unique name taken, a referenced row deleted) is a 409, a value the
database refuses is a 422, an unreachable database a 503. The database's own message
goes to the log, not to the caller: it may quote other rows' data.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from cobalt.shared.errors import CobaltError, Conflict, InvalidInput, Unavailable

if TYPE_CHECKING:
    # Only the type: the store is read by commands that serve nothing (`cobalt run list`),
    # and cobalt.shared.http loads FastAPI (tests/orchestrator/test_store_startup.py).
    from cobalt.shared.http import Translation

__all__ = ["DATABASE_TRANSLATIONS", "parse_choice"]

E = TypeVar("E", bound=StrEnum)


def parse_choice(choices: type[E], value: str, what: str) -> E:
    """`value` as a member of `choices`; InvalidInput naming every choice otherwise."""
    try:
        return choices(value)
    except ValueError as exc:
        listed = ", ".join(c.value for c in choices)
        raise InvalidInput(f"unknown {what} {value!r}; use one of: {listed}") from exc


logger = logging.getLogger(__name__)


def _conflict(exc: Exception) -> CobaltError:
    logger.info("database refused a write as conflicting: %s", exc)
    return Conflict(
        "the request clashes with stored data (a name already taken, or a row it refers "
        "to was removed meanwhile); reload and retry"
    )


def _refused_value(exc: Exception) -> CobaltError:
    logger.info("database refused a value: %s", exc)
    return InvalidInput("a value of the request cannot be stored (out of range or not text)")


def _unreachable(exc: Exception) -> CobaltError:
    logger.warning("database unavailable: %s", exc)
    return Unavailable("the database is unreachable or overloaded; retry shortly")


DATABASE_TRANSLATIONS: dict[type[Exception], Translation] = {
    IntegrityError: _conflict,
    DataError: _refused_value,
    OperationalError: _unreachable,
}
