"""The reward's fields are written in four places: the breakdown the rules compute
(`shared.reward.RewardBreakdown`), the store's columns (`store.models.RewardComponents`),
the turn's reward as the API shows it (`contracts.browse.TurnRewardPublic`) and the
components a turn search may range over (`store.repo_turn_search.REWARD_COMPONENTS`). They agree:
a field added to one and not the others fails here, not in a query."""

from __future__ import annotations

import dataclasses
import typing

from sqlalchemy import Boolean, Float, Integer

from cobalt.orchestrator.store.models import RewardComponents, TurnReward
from cobalt.orchestrator.store.repo_turn_search import REWARD_COMPONENTS
from cobalt.shared.contracts.browse import TurnRewardPublic
from cobalt.shared.reward import RewardBreakdown


def breakdown_fields() -> set[str]:
    return {field.name for field in dataclasses.fields(RewardBreakdown)}


def stored_columns() -> set[str]:
    return set(typing.get_type_hints(RewardComponents, include_extras=False))


def test_every_field_of_the_breakdown_is_a_column_and_no_column_is_more() -> None:
    assert stored_columns() == breakdown_fields()


def test_the_api_shows_only_stored_fields_and_reads_them_from_a_row() -> None:
    assert set(TurnRewardPublic.model_fields) <= stored_columns()
    assert {"total", "pass_rate", "tests_passed", "format"} <= set(TurnRewardPublic.model_fields)


def test_a_search_ranges_only_over_numeric_columns() -> None:
    table = TurnReward.__table__
    numeric = {c.name for c in table.columns if isinstance(c.type, Float | Integer)}
    assert not any(isinstance(table.columns[name].type, Boolean) for name in REWARD_COMPONENTS)
    assert set(REWARD_COMPONENTS) <= numeric & stored_columns()


def test_a_breakdown_s_values_fill_the_public_model() -> None:
    """What the rules compute, as the columns hold it, is what the API validates."""
    breakdown = RewardBreakdown(
        total=0.5, total_before_clip=0.5, validation_reward=0.0, pass_rate=0.5,
        prev_best=0.25, tests_passed=1, tests_total=2, no_code=False, correctness=0.2,
        improvement=0.3, format=0.0, think_tokens=12, answer_tokens=30,
    )  # fmt: skip
    values = breakdown.to_dict()
    shown = TurnRewardPublic.model_validate(values)
    assert shown.model_dump() == {name: values[name] for name in TurnRewardPublic.model_fields}
