"""Bodies decoded in their model's shape (`shapes.decode_shaped`) decode to what the plain
decoder gives, and whatever they refuse early the model refuses too."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from cobalt.executor.shapes import Refused, decode_shaped, shape_of
from cobalt.executor.values import loads_value
from cobalt.shared.contracts import BatchExecuteRequest, ExecuteRequest
from cobalt.shared.contracts.executor import RunCodeRequest

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=8,
)
test_keys = st.sampled_from(
    ["stdin", "expected_stdout", "fn_name", "args", "kwargs", "expected", "check", "junk"]
)
tests = st.dictionaries(test_keys, json_values, max_size=4)
request_keys = st.sampled_from(["code", "tests", "compare", "limits", "stream_chars", "extra"])
requests = st.dictionaries(
    request_keys, json_values | st.lists(tests, max_size=3) | tests, max_size=5
).map(lambda body: {"code": "print(1)", "tests": [{"stdin": ""}], **body})
bodies = requests | st.fixed_dictionaries({"requests": st.lists(requests, max_size=3)})


def _verdict(model: type[BaseModel], data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies, indent=st.sampled_from([None, 1]))
def test_a_shaped_decode_agrees_with_the_plain_one(
    body: dict[str, Any], indent: int | None
) -> None:
    text = json.dumps(body, indent=indent)
    for model in (ExecuteRequest, BatchExecuteRequest, RunCodeRequest):
        try:
            shaped = decode_shaped(text, shape_of(model))
        except Refused:
            # Refused early: the model refuses the fully decoded body too.
            assert _verdict(model, loads_value(text)) is None
            continue
        assert shaped == loads_value(text)


@pytest.mark.parametrize(
    "text",
    ['{"code": "x"', '{"code": "x",}', '{"code" "x"}', '{"tests": [{"stdin": ""},]}',
     '{"code": "x"} []', '[1, 2]', '', '{"tests": [', '{"tests": [{"stdin": ""}'],
)  # fmt: skip
def test_malformed_json_is_a_value_error_never_a_crash(text: str) -> None:
    shape = shape_of(ExecuteRequest)
    if text.startswith("["):
        assert decode_shaped(text, shape) == [1, 2]  # not an object: the model says so
        return
    with pytest.raises(ValueError):
        decode_shaped(text, shape)
