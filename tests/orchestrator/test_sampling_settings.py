"""Sampling settings defined once: every one reaches a request's decoding settings, and a
run's stored parameters read back into their model."""

from __future__ import annotations

import dataclasses

from cobalt.orchestrator.rollouts.sampling import SamplingParams
from cobalt.orchestrator.runs.jobs import spec_of_run
from cobalt.shared.contracts.executor import Compare
from cobalt.shared.contracts.runs import RunParams, SampleRunRequest
from cobalt.shared.contracts.sampling import SamplingSettings
from cobalt.shared.contracts.training_params import CommonTrainingParams


def test_every_sampling_setting_is_a_decoding_setting_of_the_request() -> None:
    decoding = {f.name for f in dataclasses.fields(SamplingParams)}
    assert set(SamplingSettings.model_fields) <= decoding
    chosen = SamplingSettings(temperature=0.3, top_p=0.5, seed=11)
    params = SamplingParams.of(chosen, n=3, max_tokens=64)
    assert params == SamplingParams(n=3, temperature=0.3, top_p=0.5, max_tokens=64, seed=11)
    # Runs and every training mode take them from the one model.
    for model in (SampleRunRequest, RunParams, CommonTrainingParams):
        assert set(SamplingSettings.model_fields) <= set(model.model_fields)


def test_a_stored_run_reads_back_with_its_feedback_turns() -> None:
    stored = SampleRunRequest(
        dataset="d", base_url="http://h/v1", model="m", n=2, turns=3, temperature=0.9
    ).model_dump(mode="json", exclude={"dataset", "base_url", "model", "template", "limit"})
    stored |= {"compare": "lcb", "limits": None, "problems": 5}
    params = RunParams.model_validate(stored)
    assert (params.feedback_turns, params.n, params.temperature) == (3, 2, 0.9)
    spec = spec_of_run(7, params)
    assert (spec.feedback_turns, spec.compare, spec.sampling.temperature) == (3, Compare.LCB, 0.9)
    # A row from before `stop_on_pass` and `think_cap_chars` were stored reads with defaults.
    old = RunParams.model_validate({"n": 1, "temperature": 0.6, "top_p": 0.95, "max_tokens": 8})
    assert (old.feedback_turns, old.stop_on_pass, old.compare) == (0, False, Compare.COBALT)
