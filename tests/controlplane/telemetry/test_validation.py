"""The fast record parser agrees with the DRF serializer: it never keeps what the serializer
refuses nor parses a value differently; what it leaves, the serializer decides."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ValidationError

from controlplane.telemetry.validation import RequestRecordInput, record_fast, records_parse
from tests import factories


def reference(raw: Any) -> dict[str, Any] | None:
    try:
        return dict(RequestRecordInput().run_validation(raw))
    except ValidationError:
        return None


def with_field(name: str, value: Any) -> dict[str, Any]:
    raw = factories.request_record()
    raw[name] = value
    return raw


def assert_agree(raw: dict[str, Any]) -> None:
    fast = record_fast(raw)
    if fast is not None:
        assert fast == reference(raw), raw


def test_a_canonical_record_takes_the_fast_path_with_the_serializers_values() -> None:
    raw = factories.request_record()

    fast = record_fast(raw)

    assert fast is not None
    assert fast == reference(raw)


ODD_VALUES: list[tuple[str, Any]] = [
    ("request_id", "r1\n"), ("request_id", " r1"), ("request_id", ""), ("request_id", "x" * 129),
    ("request_id", 12), ("tenant", "Acme"), ("tenant", "acme\n"), ("tenant", " acme "),
    ("tenant", "a" * 65), ("tenant", "-acme"), ("tenant", None), ("api_key_prefix", ""),
    ("api_key_prefix", "ABC"), ("api_key_prefix", "abc\n"), ("api_key_prefix", "  "),
    ("api_key_prefix", None), ("pipeline", "P-X"), ("pipeline", "p-md"), ("pipeline", ""),
    ("pipeline", "P-MD\n"), ("arrival_time", "2025-01-10T12:00:00"),
    ("arrival_time", "2025-01-10T13:00:00+01:00"), ("arrival_time", "2025-01-10 12:00:00Z"),
    ("arrival_time", "2025-01-10T12:00:00.123456Z"), ("arrival_time", "yesterday"),
    ("arrival_time", 1736510400), ("input_tokens", "1000"), ("input_tokens", 1000.0),
    ("input_tokens", True), ("hit_tokens", -1), ("hit_tokens", 2**31), ("ttft_s", "0.4"),
    ("ttft_s", None), ("ttft_s", -0.1), ("ttft_s", float("nan")), ("ttft_s", float("inf")),
    ("ttft_s", 1), ("wan_bytes", 2**63), ("wan_bytes", None), ("wan_bytes", 2**63 - 1),
    ("handoff_mode", ""), ("handoff_mode", "none"), ("handoff_mode", None),
    ("sla_met", "true"), ("sla_met", 1), ("sla_met", None), ("rejected", "false"),
    ("extra_field", "ignored"), ("api_key_prefix", "ab12"),
    ("finish_time", "2025-01-10t12:00:05z"), ("finish_time", "2025-01-10T12:00:05.1234567Z"),
    ("finish_time", "2025-01-10T13:00:05+0100"), ("finish_time", "2025-01-10T13:00:05+01"),
    ("finish_time", "2025-01-10T12:00Z"), ("finish_time", "2025-01-10T24:00:00Z"),
    ("finish_time", "20250110T120005Z"), ("finish_time", "2025-01-10T12:00:05.5-00:30"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "value"), ODD_VALUES)
def test_odd_values_agree_with_the_serializer(name: str, value: Any) -> None:
    assert_agree(with_field(name, value))


@pytest.mark.parametrize(
    "name", ["ttft_s", "tpot_s", "wan_bytes", "handoff_mode", "rld_tokens", "rejected"]
)
def test_missing_optional_fields_take_the_serializers_defaults(name: str) -> None:
    raw = factories.request_record()
    del raw[name]

    assert record_fast(raw) is not None
    assert_agree(raw)


@pytest.mark.parametrize("name", ["request_id", "tenant", "sla_met", "finish_time"])
def test_missing_required_fields_are_refused_with_the_serializers_message(name: str) -> None:
    raw = factories.request_record()
    del raw[name]

    valid, errors = records_parse([raw])

    assert valid == []
    assert errors == {0: {name: ["This field is required."]}}


def test_both_cross_field_rules_are_reported() -> None:
    raw = factories.request_record(input_tokens=5, finish_time="2025-01-10T11:00:00Z",
                                   arrival_time="2025-01-10T12:00:00Z")  # fmt: skip

    _, errors = records_parse([raw])

    assert errors == {0: {"input_tokens": ["Must equal hit_tokens + miss_tokens."],
                          "finish_time": ["Must not be before arrival_time."]}}  # fmt: skip


FIELD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["P-MD", "P-RLD-MD", "one-shot", "2025-01-10T12:00:00Z", "ab12", " 7 "]),
)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(factories.request_record())), value=FIELD_VALUES)
def test_fuzzed_fields_never_make_the_parsers_disagree(name: str, value: Any) -> None:
    assert_agree(with_field(name, value))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(ODD_VALUES), max_size=3), st.integers(0, 4))
def test_a_batch_parses_as_its_records_one_by_one(odd: list[tuple[str, Any]], at: int) -> None:
    # given a batch of good canonical records, some with an odd value put in
    batch = [factories.request_record() for _ in range(5)]
    for name, value in odd:
        batch[at][name] = value

    valid, errors = records_parse(batch)

    # then each record comes out as the reference parser reads it alone, good or bad
    for index, raw in enumerate(batch):
        alone = reference(raw)
        assert (index in errors) == (alone is None), raw
        if alone is not None:
            assert dict(valid)[index] == alone
