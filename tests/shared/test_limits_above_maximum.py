"""Every limit a run or request can ask for is compared with the executor's maximum by one
function (`limits_above_maximum`), which the executor's refusal and the orchestrator's
check at run creation both call: a property over all of `Limits`' fields, not one example."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.shared.contracts.executor import (
    MAX_LIMIT_SETTINGS,
    Limits,
    MaxLimits,
    limits_above_maximum,
)

seconds = st.floats(min_value=0.01, max_value=600, allow_nan=False)
sizes = st.integers(min_value=16, max_value=65536)
limits = st.builds(
    Limits,
    wall_s=seconds,
    cpu_s=st.none() | seconds,
    memory_mb=sizes,
    output_kb=sizes,
    total_s=st.none() | st.floats(min_value=0.01, max_value=3600, allow_nan=False),
)
maxima = st.builds(
    MaxLimits,
    wall_s=seconds,
    cpu_s=st.none() | seconds,
    memory_mb=st.integers(min_value=16, max_value=1 << 20),
    output_kb=st.integers(min_value=1, max_value=1 << 20),
    total_s=st.none() | st.floats(min_value=0.01, max_value=7200, allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(asked=limits, highest=maxima)
def test_exactly_the_limits_above_their_maximum_are_named_with_their_setting(
    asked: Limits, highest: MaxLimits
) -> None:
    found = {above.field: above for above in limits_above_maximum(asked, highest)}
    for name in Limits.model_fields:
        value, maximum = getattr(asked, name), getattr(highest, name)
        over = value is not None and maximum is not None and value > maximum
        assert (f"limits.{name}" in found) == over, name
        if over:
            above = found[f"limits.{name}"]
            assert (above.value, above.maximum) == (value, maximum)
            assert above.setting == MAX_LIMIT_SETTINGS[name]
            assert MAX_LIMIT_SETTINGS[name] in above.message()


def test_every_limit_has_the_setting_that_raises_it() -> None:
    assert set(MAX_LIMIT_SETTINGS) == set(Limits.model_fields) == set(MaxLimits.model_fields)
