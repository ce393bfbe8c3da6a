"""The array literals of the bulk writes read back as the values they were made from."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import connection

from controlplane.telemetry.writes import RECORD_FIELDS, copy_text, pg_array

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def read_back(values: list[Any], pg_type: str) -> list[Any]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT %s::{pg_type}[]", [pg_array(values)])
        return list(cursor.fetchone()[0])


def test_strings_with_quotes_backslashes_braces_and_the_word_null_survive() -> None:
    values = ['a"b', "c\\d", "{e,f}", "NULL", "null", "", " sp ", "ünï", None, "x'y"]

    assert read_back(values, "varchar(64)") == values


def test_plain_strings_and_integers_take_the_short_path_and_survive() -> None:
    assert read_back(["a", "NULL", "x,y", "{z}", ""], "text") == ["a", "NULL", "x,y", "{z}", ""]
    assert read_back(['x","y', "ok"], "text") == ['x","y', "ok"]
    assert read_back([1, -2, 3], "integer") == [1, -2, 3]


def test_numbers_booleans_times_and_uuids_survive() -> None:
    when = datetime(2026, 1, 5, 10, 0, 0, 123456, tzinfo=UTC)
    offset = when.astimezone(timezone(timedelta(hours=-3, minutes=-30)))
    token = uuid.uuid4()

    assert read_back([0, -5, 2**63 - 1, None], "bigint") == [0, -5, 2**63 - 1, None]
    assert read_back([0.1, 1e-300, 123.456], "double precision") == [0.1, 1e-300, 123.456]
    assert read_back([True, False, None], "boolean") == [True, False, None]
    assert read_back([when, offset], "timestamp with time zone") == [when, when]
    assert read_back([token], "uuid") == [token]


def test_all_booleans_and_all_times_take_the_short_paths_and_survive() -> None:
    when = datetime(2026, 1, 5, 10, 0, 0, 123456, tzinfo=UTC)
    offset = when.astimezone(timezone(timedelta(hours=5, minutes=45)))
    later = when + timedelta(days=400, microseconds=1)

    assert read_back([True, False, True], "boolean") == [True, False, True]
    assert read_back([when, offset, later], "timestamp with time zone") == [when, when, later]


def _rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines()]


def test_copy_text_is_one_line_per_record_with_nulls_booleans_and_times_in_copy_form() -> None:
    when = datetime(2026, 1, 5, 10, 0, 0, 123456, tzinfo=UTC)
    record = {"request_id": "r-1", "tenant": "acme", "api_key_prefix": "", "model": "m",
              "site": "dc-a", "pipeline": "P-MD", "arrival_time": when, "finish_time": when,
              "input_tokens": 10, "hit_tokens": 4, "miss_tokens": 6, "output_tokens": 2,
              "ttft_s": None, "tpot_s": 0.25, "wan_bytes": 2**40, "handoff_mode": "",
              "rld_tokens": 0, "md_tokens": 2, "sla_met": True, "rejected": False,
              "config_version": None}  # fmt: skip
    batch = uuid.uuid4()

    text = copy_text([record, record], (batch, None, when))

    assert text is not None
    first, second = _rows(text)
    assert first == second
    assert first[:6] == ["r-1", "acme", "", "m", "dc-a", "P-MD"]
    assert [datetime.fromisoformat(v) for v in first[6:8]] == [when, when]
    assert first[12:15] == ["\\N", "0.25", str(2**40)]
    assert first[18:] == ["t", "f", "\\N", str(batch), "\\N", when.isoformat()]


@pytest.mark.parametrize("value", ["a\tb", "a\nb", "a\rb", "a\\b", "a\\Nb"])
def test_copy_text_refuses_a_value_it_would_have_to_escape(value: str) -> None:
    when = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
    record = {"request_id": "r-1", "tenant": value, "api_key_prefix": "", "model": "m",
              "site": "dc-a", "pipeline": "P-MD", "arrival_time": when, "finish_time": when,
              "input_tokens": 10, "hit_tokens": 4, "miss_tokens": 6, "output_tokens": 2,
              "ttft_s": None, "tpot_s": None, "wan_bytes": 0, "handoff_mode": "",
              "rld_tokens": 0, "md_tokens": 0, "sla_met": False, "rejected": True,
              "config_version": 3}  # fmt: skip

    assert copy_text([record], (uuid.uuid4(), None, when)) is None


def test_copy_text_puts_each_field_in_its_column_of_record_fields() -> None:
    """``copy_text`` spells the columns out (for speed): each lands where ``records_write``'s
    ``COPY`` column list (``request_id``, then ``RECORD_FIELDS``) puts it."""
    when = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
    record: dict[str, Any] = {
        "request_id": "r-1", "tenant": "acme", "api_key_prefix": "k1", "model": "m",
        "site": "dc-a", "pipeline": "P-MD", "arrival_time": when,
        "finish_time": when + timedelta(seconds=1), "input_tokens": 11, "hit_tokens": 12,
        "miss_tokens": 13, "output_tokens": 14, "ttft_s": 0.5, "tpot_s": 0.25,
        "wan_bytes": 15, "handoff_mode": "one-shot", "rld_tokens": 16, "md_tokens": 17,
        "sla_met": True, "rejected": False, "config_version": 18,
    }  # fmt: skip

    text = copy_text([record], (uuid.uuid4(), None, when))

    assert text is not None
    (row,) = _rows(text)
    names = ("request_id", *RECORD_FIELDS)
    assert len(row) == len(names) + 3  # and the tail: batch, token, received
    for name, cell in zip(names, row, strict=False):
        value = record[name]
        if isinstance(value, datetime):
            assert datetime.fromisoformat(cell) == value, name
        elif isinstance(value, bool):
            assert cell == ("t" if value else "f"), name
        else:
            assert cell == str(value), name
