"""JSON columns that hold pydantic models: rows are read back as the model, so code past
the store never decodes a dict (`ModelJson(RunParams)`; `TrainingParamsJson`, a training
job's parameters as whichever mode's model the JSON names).

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

from cobalt.shared.contracts.training_params import (
    MODE_PARAMS,
    TrainingParams,
    stored_training_params,
)

__all__ = ["ModelJson", "TrainingParamsJson", "checked_training_params"]

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


def checked_training_params(value: object) -> TrainingParams:
    """`value`, which must be one mode's model (`TrainingParams`).

    Raises:
        TypeError: anything else (a mapping the writer has not validated, say).
    """
    if not isinstance(value, tuple(MODE_PARAMS.values())):
        raise TypeError(
            f"a training params column stores a mode's TrainingParams, not {type(value).__name__}"
        )
    return value  # type: ignore[return-value]  # one of the union's members


class TrainingParamsJson(TypeDecorator[TrainingParams]):
    """A training job's parameters, one mode's model (`TrainingParams`), stored with their
    `mode` inside the JSON so the column alone says which model it holds.

    Rows written before 0015 held the JSON less its mode (the job's `mode` column said it):
    migration 0015 copies each row's mode into its JSON, so every row names its mode and
    the read needs no other column (a column type sees only its own). Rows written before
    the per-mode models also carry other modes' settings: `stored_training_params` drops
    them on read, as it did before, so the migration rewrites nothing else.
    """

    impl = JSON
    cache_ok = True  # no state: the SQL it renders is plain JSON's

    def process_bind_param(self, value: TrainingParams | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        return checked_training_params(value).model_dump(mode="json")

    def process_result_value(self, value: Any, dialect: Dialect) -> TrainingParams | None:
        if value is None:
            return None
        return stored_training_params(value["mode"], value)
