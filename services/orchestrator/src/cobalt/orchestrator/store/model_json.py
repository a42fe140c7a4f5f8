"""A JSON column that holds one pydantic model: rows are read back as the model, so code
past the store never decodes a dict (`ModelJson(RunParams)`).

What is stored is the model's JSON (`model_dump(mode="json")`, aliases as the contract
names them), the same text the columns held as plain JSON before, so no migration comes
with the type. Rows written by older versions are read by the model's own rules (missing
keys take their defaults; `RunParams` ignores retired keys).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy import JSON
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

__all__ = ["ModelJson"]

M = TypeVar("M", bound=BaseModel)


class ModelJson(TypeDecorator[M]):
    """Plain JSON (text kept as written, like `models.JsonValue`) of a `model` instance.

    Writing anything but a `model` instance fails (TypeError): a writer hands the store a
    checked model, never a mapping it has not validated.
    """

    impl = JSON
    cache_ok = True  # the model class is hashable and fixes the SQL the type renders

    def __init__(self, model: type[M]) -> None:
        super().__init__()
        self.model = model

    def process_bind_param(self, value: M | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, self.model):
            raise TypeError(
                f"a {self.model.__name__} column stores {self.model.__name__} instances, "
                f"not {type(value).__name__}"
            )
        return value.model_dump(mode="json")

    def process_result_value(self, value: Any, dialect: Dialect) -> M | None:
        if value is None:
            return None
        return self.model.model_validate(value)
