"""Trainer settings, read from `COBALT_TRAINER_*` environment variables.

The GRPO hyperparameters are `cobalt.shared.contracts.training.TrainerHyperparameters`
(the orchestrator validates a job's with the same model); defaults are the paper's
(METHOD.md, "Training"), every one configurable. The entry point builds this once and
passes it down.
"""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.settings import CobaltSettings

__all__ = ["TrainerSettings"]


class TrainerSettings(CobaltSettings, TrainerHyperparameters):
    """Everything one GRPO run can be told: the hyperparameters, from the environment."""

    model_config = SettingsConfigDict(env_prefix="COBALT_TRAINER_", frozen=True, extra="ignore")
