"""The records endpoint's JSON parser gives what the general parser gives, on any body."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ParseError

from controlplane.core.parsers import MAX_JSON_DEPTH, JSONParser
from controlplane.telemetry.api.views import RecordBatchParser
from tests import factories

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text()
documents = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=30,
)


def _parse(parser: JSONParser, body: bytes) -> tuple[str, Any]:
    try:
        return "ok", parser.parse(io.BytesIO(body))
    except ParseError as exc:
        return "error", str(exc.detail)


def _same(body: bytes) -> None:
    fast, general = _parse(RecordBatchParser(), body), _parse(JSONParser(), body)
    # NaN is not equal to itself: compare the JSON texts of the results
    assert json.dumps(fast, sort_keys=True) == json.dumps(general, sort_keys=True)


@settings(max_examples=200, deadline=None)
@given(documents)
def test_any_document_parses_as_the_general_parser_does(document: Any) -> None:
    _same(json.dumps(document).encode())
    _same(json.dumps({"records": [document]}).encode())


@settings(max_examples=50, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=8), scalars, max_size=6), max_size=5))
def test_flat_batches_parse_as_the_general_parser_does(records: list[dict[str, Any]]) -> None:
    _same(json.dumps({"records": records}).encode())


@pytest.mark.parametrize(
    "body",
    [
        b'{"records": [{"a": 1, "a": 2}]}',  # a repeated key: the last one wins in both
        b'{"records": [{"t": "\\u00e9\\ud83d\\ude00"}]}',
        b'{"records": [{"x": NaN}]}',
        b'{"records": [',
        b"\xff\xfe",
        b'{"records": [{"x": 1}]} trailing',
        json.dumps({"records": [factories.request_record()]}).encode(),
    ],
)
def test_edge_bodies_parse_as_the_general_parser_does(body: bytes) -> None:
    _same(body)


def test_a_document_nested_too_deep_is_refused() -> None:
    deep: Any = 1
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]

    with pytest.raises(ParseError, match="nested deeper"):
        RecordBatchParser().parse(io.BytesIO(json.dumps({"records": [{"x": deep}]}).encode()))
