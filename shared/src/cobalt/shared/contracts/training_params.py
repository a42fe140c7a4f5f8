"""A training job's parameters, one typed model per mode (`TrainingParams`, a union
discriminated by `mode`), defined once for the orchestrator that stores them, the REST
contract that carries them, the rollout jobs that read them and the trainer.

Which setting belongs to which mode is the models' shape, not a hand-written list of
names: every mode has the rollout and GRPO settings (`CommonTrainingParams`); the single-
turn modes add the reward's format rules; the episode modes (multi-turn, VeRPO) add the
episode's settings; VeRPO adds its outcome weight and drops the format rules (its reward
reads only verdicts).

Stored as `model_dump(mode="json")`, the mode included (the orchestrator's
`TrainingParamsJson` column), and read back with `stored_training_params`, which also reads
rows written before the models were split (they carry every mode's settings: the ones of
other modes are dropped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    TypeAdapter,
    ValidationError,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from cobalt.shared import defaults
from cobalt.shared.contracts.bounds import (
    INT32_MAX,
    MODEL_NAME_CHARS,
    TEMPLATE_NAME_CHARS,
    URL_CHARS,
)
from cobalt.shared.contracts.hyperparameters import TrainerHyperparameters, TrainingMode
from cobalt.shared.contracts.sampling import SamplingSettings
from cobalt.shared.errors import InvalidInput, first_validation_error
from cobalt.shared.reward_format import RewardFormat
from cobalt.shared.trackers import parse_report_to

__all__ = [
    "CobaltParams",
    "CommonTrainingParams",
    "ContextSelection",
    "EpisodeParams",
    "MODE_PARAMS",
    "MultiTurnParams",
    "SingleTurnParams",
    "AnyModeTrainingParams",
    "TrainingParams",
    "TrainingParamsRequest",
    "VerpoParams",
    "stored_training_params",
    "training_params",
]

_CONFIG = ConfigDict(
    extra="forbid",
    frozen=True,
    allow_inf_nan=False,
    validate_by_name=True,
    serialize_by_alias=True,
)
"""Attributes say what they count (`episode_turns`); the contract's names stay (`turns`)."""


class ContextSelection(BaseModel):
    """Which contexts a round rolls out and which groups a step keeps (docs/training.md,
    "Informative groups"): both off by default, the paper's fixed seeded order."""

    model_config = _CONFIG

    filter_zero_variance: bool = Field(
        default=False,
        description="drop groups whose responses all got the same reward (no GRPO signal) "
        "and refill the step from more contexts (DAPO's dynamic sampling)",
    )
    max_refill_rounds: int = Field(
        default=3,
        ge=0,
        le=64,
        description="with filter_zero_variance: extra batches of contexts a round may take "
        "for the groups it dropped; past it the step trains on the informative ones it has",
    )
    schedule_contexts: bool = Field(
        default=False,
        description="order each round's contexts by their recorded pass rates: contexts "
        "solved or failed by every sample of their last `schedule_window` visits go last "
        "(revisited with `revisit_probability`), those with variance first",
    )
    schedule_window: int = Field(
        default=2, ge=1, le=64, description="with schedule_contexts: the visits (k) judged"
    )
    revisit_probability: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="with schedule_contexts: the chance a settled context keeps its place "
        "(drawn per round and context from the job's `seed`)",
    )


class CommonTrainingParams(SamplingSettings, ContextSelection):
    """What every mode has: the sampling settings (`SamplingSettings`), the endpoint and
    staleness here, GRPO's in `trainer` (defaults: docs/method.md).

    Unknown names are refused, so a misspelt setting never silently keeps its default.
    """

    model_config = _CONFIG

    turn_zero_contexts_only: ClassVar[bool] = True
    """The mode trains on the bandit dataset's turn-0 contexts only (problem alone)."""

    base_url: str = Field(
        default="http://127.0.0.1:8000/v1",
        min_length=1,
        max_length=URL_CHARS,
        description="the inference service (vLLM) /v1 URL",
    )
    replicas: list[Annotated[str, Field(min_length=1, max_length=URL_CHARS)]] | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="every inference replica's /v1 URL (`dns+http://NAME:PORT/v1`: each "
        "address of a Kubernetes headless Service); the rollout workers send each group to "
        "one ready replica, by a hash of its context (null: base_url alone)",
    )
    served_model: str = Field(
        default="policy",
        min_length=1,
        max_length=MODEL_NAME_CHARS,
        description="the model name it serves",
    )
    max_staleness: int = Field(
        default=0,
        ge=0,
        le=INT32_MAX,
        description="policy-version lag a sample may have (0: synchronous)",
    )
    max_steps: int | None = Field(
        default=None,
        ge=1,
        le=INT32_MAX,
        description="the job's step budget: it is finished after this many steps (null: no "
        "limit; with `epochs`, whichever is spent first)",
    )
    epochs: int | None = Field(
        default=None,
        ge=1,
        le=INT32_MAX,
        description="the job's budget in epochs, an epoch being every context the mode trains "
        "on visited once (null: no limit; with `max_steps`, whichever is spent first)",
    )
    judge_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="re-runs of a response the sandbox failed to judge before it is masked",
    )
    error_budget: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="share of sampled responses that may be masked for sandbox errors; past "
        "it the job fails naming the executor (docs/reward.md, infrastructure errors)",
    )
    trainer: TrainerHyperparameters = Field(default_factory=TrainerHyperparameters)
    """Group size (n_samples), contexts per step, the response cap and GRPO's settings."""
    report_to: list[str] | None = Field(
        default=None,
        description="experiment trackers the trainer reports to (tensorboard, mlflow, wandb; "
        "[]: none); null: the trainer's COBALT_REPORT_TO (docs/trackers.md)",
    )

    def step_budget(self, contexts: int) -> int | None:
        """The steps the job trains before it is finished, over `contexts` contexts (those
        its mode trains on); None: no budget, it trains until stopped.

        Round r takes the next `contexts_per_step` contexts in a fixed order, wrapping
        around, so `epochs` epochs take ceil(epochs x contexts / contexts_per_step) steps
        (the last step's slice may reach into the next epoch).
        """
        per_step = self.trainer.contexts_per_step
        limits = [self.max_steps]
        if self.epochs is not None:
            limits.append(max(1, math.ceil(self.epochs * contexts / per_step)))
        return min((limit for limit in limits if limit is not None), default=None)

    @field_validator("report_to", mode="before")
    @classmethod
    def _trackers(cls, value: Any) -> Any:
        if not isinstance(value, str | list) or not all(isinstance(v, str) for v in value):
            return value  # None, or not names at all: the field's type refuses it
        try:
            return list(parse_report_to(value))
        except InvalidInput as exc:  # pydantic reports ValueErrors with the field's name
            raise ValueError(exc.message) from exc


class FormatRules(BaseModel):
    """The reward's format rules (every mode but VeRPO)."""

    model_config = _CONFIG

    reward_format: RewardFormat = Field(
        default=RewardFormat.REASONING,
        description="the reward's format rules: reasoning (the paper's: one </think>) or "
        "instruct (models without a thinking block; docs/reward.md)",
    )


class EpisodeSettings(BaseModel):
    """An online episode's settings (multi-turn and VeRPO modes)."""

    model_config = _CONFIG

    episode_turns: int = Field(
        default=3,
        ge=1,
        le=64,
        alias="turns",
        description="episodes: the most turns an episode has, turn 0 included (stored and "
        "sent as `turns`)",
    )
    stop_on_pass: bool = Field(
        default=True, description="episodes: end an episode once every public test passes"
    )
    think_cap_chars: int = Field(
        default=defaults.HISTORY_CAP_CHARS,
        ge=1,
        le=INT32_MAX,
        description="episodes: characters of an answer the history keeps",
    )
    template: str | None = Field(
        default=None,
        min_length=1,
        max_length=TEMPLATE_NAME_CHARS,
        description="episodes: feedback template (default: the contexts' source run's)",
    )


class VerpoSettings(BaseModel):
    """VeRPO's reward mix."""

    model_config = _CONFIG

    verpo_outcome_weight: float = Field(
        default=defaults.VERPO_OUTCOME_WEIGHT,
        ge=0,
        le=1,
        description="verpo: the all-tests outcome's share of a turn's reward (alpha); the "
        "difficulty-weighted dense reward has the rest",
    )


class CobaltParams(CommonTrainingParams, FormatRules):
    turn_zero_contexts_only: ClassVar[bool] = False  # partial trajectories with prev_best too
    mode: Literal[TrainingMode.COBALT] = TrainingMode.COBALT


class SingleTurnParams(CommonTrainingParams, FormatRules):
    mode: Literal[TrainingMode.SINGLE_TURN] = TrainingMode.SINGLE_TURN


class EpisodeParams(CommonTrainingParams, EpisodeSettings):
    """The modes that roll out online episodes from the turn-0 contexts."""


class MultiTurnParams(EpisodeParams, FormatRules):
    mode: Literal[TrainingMode.MULTI_TURN] = TrainingMode.MULTI_TURN


class VerpoParams(EpisodeParams, VerpoSettings):
    mode: Literal[TrainingMode.VERPO] = TrainingMode.VERPO


TrainingParams = Annotated[
    CobaltParams | SingleTurnParams | MultiTurnParams | VerpoParams, Field(discriminator="mode")
]
_ADAPTER: TypeAdapter[TrainingParams] = TypeAdapter(TrainingParams)

MODE_PARAMS: dict[TrainingMode, type[CommonTrainingParams]] = {
    TrainingMode.COBALT: CobaltParams,
    TrainingMode.SINGLE_TURN: SingleTurnParams,
    TrainingMode.MULTI_TURN: MultiTurnParams,
    TrainingMode.VERPO: VerpoParams,
}
"""Each mode's parameters (the members of `TrainingParams`)."""


class AnyModeTrainingParams(CommonTrainingParams, FormatRules, EpisodeSettings, VerpoSettings):
    """Every mode's settings at once, as a new job's request carries them (its `mode`
    beside them): a value is checked before whether its mode has it, so a bad value reads
    the same in every mode."""


class _DocumentedAsAnyMode:
    """A new job's `params` as the contract shows them (`AnyModeTrainingParams`), kept a
    mapping until `training_params` checks them against the job's mode, whose messages
    name a setting of another mode (pydantic's union errors would not)."""

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return handler(dict[str, Any])

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(AnyModeTrainingParams.__pydantic_core_schema__)


TrainingParamsRequest = Annotated[dict[str, Any], _DocumentedAsAnyMode]
"""`TrainingJobCreate.params`: a mapping, documented as `AnyModeTrainingParams`."""


def _names(model: type[BaseModel]) -> set[str]:
    """The keys `model` reads: its fields' names and their aliases (the stored names)."""
    return {
        name
        for field_name, field in model.model_fields.items()
        for name in (field_name, field.alias)
        if name is not None
    }


_MISPLACED: tuple[tuple[type[BaseModel], str], ...] = (
    (EpisodeSettings, "{names}: multi-turn settings, but the job's mode is {mode}"),
    (FormatRules, "{names}: the VeRPO reward reads only the tests' verdicts, no format rules"),
    (VerpoSettings, "{names}: a VeRPO setting, but the job's mode is {mode}"),
)
"""A setting given to a mode without it: the group it belongs to says why."""


def training_params(mode: TrainingMode, raw: Mapping[str, Any]) -> TrainingParams:
    """A new job's parameters for `mode`, checked.

    Raises:
        InvalidInput: a bad value, an unknown name, or a setting `mode` does not have (the
            message names the setting and why).
    """
    try:
        AnyModeTrainingParams.model_validate(raw)
    except ValidationError as exc:
        reason = first_validation_error(exc, where="params")
        raise InvalidInput(f"training parameter {reason}") from exc
    fields = _names(MODE_PARAMS[mode])
    for group, why in _MISPLACED:
        misplaced = sorted(_names(group) & raw.keys() - fields)
        if misplaced:
            raise InvalidInput(why.format(names=", ".join(misplaced), mode=mode))
    return _ADAPTER.validate_python({**raw, "mode": mode})


def stored_training_params(
    mode: str, stored: Mapping[str, Any] | CommonTrainingParams
) -> TrainingParams:
    """The parameters a job stored (`model_dump()`, with or without their mode), read as
    `mode`'s model; settings of other modes, which rows written before the per-mode models
    carry, are dropped. Parameters already typed (`TrainingJobPublic.params`) are checked
    against `mode` alike."""
    if isinstance(stored, BaseModel):
        stored = stored.model_dump(exclude={"mode"})
    fields = _names(MODE_PARAMS[TrainingMode(mode)])
    return _ADAPTER.validate_python(
        {**{k: v for k, v in stored.items() if k in fields}, "mode": mode}
    )
