"""Trace readers: the three formats, malformed lines, and the full public traces when present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.workload import (
    Request,
    TraceFormatError,
    detect_format,
    read_azure,
    read_mooncake,
    read_qwen,
    read_trace,
    trace_stats,
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "fixtures" / "traces"
SHARED_DATA = ROOT.parent / "shared" / "data"
CONVERSATION = SHARED_DATA / "mooncake_conversation_trace.jsonl"
SYNTHETIC = SHARED_DATA / "mooncake_synthetic_trace.jsonl"
AZURE = SHARED_DATA / "azure_llm_inference_conv_2023.csv"


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = '{"timestamp": 1500, "input_length": 600, "output_length": 7, "hash_ids": [0, 1]}'


def test_mooncake_line_becomes_a_request(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.jsonl", [GOOD, ""])

    trace = read_mooncake(path)

    assert trace.requests == (
        Request(id="1", arrival_s=1.5, input_tokens=600, output_tokens=7, block_hashes=(0, 1)),
    )
    assert trace.block_size == 512
    assert trace.format == "mooncake"
    assert trace.skipped == 0


def test_mooncake_optional_keys_are_read(tmp_path: Path) -> None:
    line = json.dumps(
        {
            "timestamp": 0,
            "input_length": 1,
            "output_length": 0,
            "hash_ids": [5],
            "id": "s1-t2",
            "session": "s1",
            "tenant": "acme",
            "turn": 2,
        }
    )
    (request,) = read_mooncake(_write(tmp_path, "t.jsonl", [line])).requests

    assert (request.id, request.session, request.tenant, request.turn) == ("s1-t2", "s1", "acme", 2)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("{not json", "json"),
        ("[1, 2]", "json"),
        ('{"input_length": 600, "output_length": 7, "hash_ids": []}', "timestamp"),
        ('{"timestamp": -1, "input_length": 600, "output_length": 7, "hash_ids": []}', "timestamp"),
        (
            '{"timestamp": 0, "input_length": "600", "output_length": 7, "hash_ids": []}',
            "input_length",
        ),
        ('{"timestamp": 0, "input_length": 0, "output_length": 7, "hash_ids": []}', "input_length"),
        (
            '{"timestamp": 0, "input_length": 6, "output_length": 1.5, "hash_ids": []}',
            "output_length",
        ),
        ('{"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": "0,1"}', "hash_ids"),
        (
            '{"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": [0, "x"]}',
            "hash_ids",
        ),
        (
            '{"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": [], "turn": 0}',
            "turn",
        ),
    ],
)
def test_malformed_mooncake_line_is_reported_by_line_and_field(
    tmp_path: Path, line: str, field: str
) -> None:
    path = _write(tmp_path, "bad.jsonl", [GOOD, "", line, GOOD])

    with pytest.raises(TraceFormatError) as caught:
        read_mooncake(path)

    assert caught.value.line == 3
    assert caught.value.field == field
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}:3: {field}: ")


def test_skip_invalid_counts_malformed_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.jsonl", [GOOD, "{oops", GOOD, '{"timestamp": 0}'])

    trace = read_mooncake(path, skip_invalid=True)

    assert [r.id for r in trace.requests] == ["1", "3"]
    assert trace.skipped == 2


def test_qwen_sessions_follow_parent_chains() -> None:
    trace = read_qwen(SAMPLES / "qwen_bailian_example.jsonl")

    by_id = {r.id: r for r in trace.requests}
    assert trace.block_size == 16
    assert [by_id[i].session for i in ("100", "102", "103")] == ["100", "100", "100"]
    assert [by_id[i].session for i in ("101", "104")] == ["101", "101"]
    assert by_id["105"].session == "105"
    assert by_id["103"].turn == 3
    assert by_id["104"].arrival_s == 3.5
    assert by_id["102"].block_hashes == (1, 2, 4, 5, 6)


def test_qwen_malformed_line(tmp_path: Path) -> None:
    line = (
        '{"chat_id": "x", "parent_chat_id": -1, "timestamp": 0, "input_length": 1, '
        '"output_length": 1, "turn": 1, "hash_ids": [1]}'
    )
    with pytest.raises(TraceFormatError, match=r":1: chat_id: "):
        read_qwen(_write(tmp_path, "q.jsonl", [line]))


def test_qwen_orphan_keeps_its_parent_as_session(tmp_path: Path) -> None:
    line = (
        '{"chat_id": 7, "parent_chat_id": 3, "timestamp": 0, "input_length": 1, '
        '"output_length": 1, "turn": 2, "hash_ids": [1]}'
    )
    (request,) = read_qwen(_write(tmp_path, "q.jsonl", [line])).requests
    assert request.session == "3"


def test_azure_rows_have_relative_times_and_no_hashes() -> None:
    trace = read_azure(SAMPLES / "azure_conv_2023_sample.csv")

    first, second = trace.requests[:2]
    assert len(trace.requests) == 200
    assert trace.block_size is None
    # 2023-11-16 18:15:46.6805900 then 18:15:50.9951690
    assert first == Request(id="2", arrival_s=0.0, input_tokens=374, output_tokens=44)
    assert second.arrival_s == pytest.approx(4.314579)
    assert second.block_hashes == ()


def test_azure_errors(tmp_path: Path) -> None:
    header = "TIMESTAMP,ContextTokens,GeneratedTokens"
    good = "2023-11-16 18:15:46.6805900,374,44"
    with pytest.raises(TraceFormatError, match=r":1: GeneratedTokens: missing column"):
        read_azure(_write(tmp_path, "a.csv", ["TIMESTAMP,ContextTokens", good]))
    with pytest.raises(TraceFormatError, match=r":3: TIMESTAMP: "):
        read_azure(_write(tmp_path, "b.csv", [header, good, "yesterday,1,1"]))
    with pytest.raises(TraceFormatError, match=r":2: ContextTokens: "):
        read_azure(_write(tmp_path, "c.csv", [header, "2023-11-16 18:15:46,abc,1"]))
    with pytest.raises(TraceFormatError, match=r":2: GeneratedTokens: missing"):
        read_azure(_write(tmp_path, "d.csv", [header, "2023-11-16 18:15:46,5"]))
    trace = read_azure(_write(tmp_path, "e.csv", [header, "bad,1,1", good]), skip_invalid=True)
    assert (len(trace.requests), trace.skipped) == (1, 1)


def test_format_detection() -> None:
    assert detect_format(SAMPLES / "azure_conv_2023_sample.csv") == "azure"
    assert detect_format(SAMPLES / "qwen_bailian_example.jsonl") == "qwen"
    assert detect_format(SAMPLES / "mooncake_conversation_sample.jsonl") == "mooncake"
    assert read_trace(SAMPLES / "qwen_bailian_example.jsonl").format == "qwen"
    with pytest.raises(ValueError, match="format"):
        read_trace(SAMPLES / "qwen_bailian_example.jsonl", "parquet")


def test_mooncake_sample_hits() -> None:
    trace = read_trace(SAMPLES / "mooncake_conversation_sample.jsonl")
    stats = trace_stats(trace.requests, block_size=trace.block_size)

    assert stats.requests == 200
    assert 0 < stats.token_weighted_hit < 1


def test_qwen_example_hits_by_hand() -> None:
    # 16-token blocks, replayed in time order:
    # 100 [1,2,3] 40 tok: 0 hit. 101 [1,2,7] 33 tok: [1,2] -> 32. 102 [1,2,4,5,6] 70: [1,2] -> 32.
    # 103 [1,2,4,5,8,9] 96: [1,2,4,5] -> 64. 104 [1,2,10,11] 50: [1,2] -> 32. 105 [12] 16: 0.
    trace = read_qwen(SAMPLES / "qwen_bailian_example.jsonl")
    stats = trace_stats(trace.requests, block_size=16)

    assert stats.token_weighted_hit == pytest.approx(160 / 305)
    assert stats.request_weighted_hit == pytest.approx((32 / 33 + 32 / 70 + 64 / 96 + 32 / 50) / 6)


FIELDS = ["timestamp", "input_length", "output_length", "hash_ids", "id", "session", "turn"]
json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=10**6),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.one_of(st.integers(), st.text(max_size=2)), max_size=4),
)
json_lines = st.dictionaries(st.sampled_from(FIELDS), json_values).map(json.dumps)
any_lines = st.lists(st.one_of(json_lines, st.text(max_size=40)), max_size=8)


@settings(max_examples=200, deadline=None)
@given(lines=any_lines)
def test_any_input_parses_or_fails_with_a_located_error(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str]
) -> None:
    # Whatever the bytes, a reader returns requests or raises TraceFormatError naming a line;
    # with skip_invalid every line is either a request or counted as skipped.
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    text = "\n".join(lines)
    path.write_text(text, encoding="utf-8")
    try:
        strict = read_mooncake(path)
    except TraceFormatError as exc:
        assert exc.line >= 1
        assert exc.field in {*FIELDS, "json"}
    else:
        assert strict.skipped == 0
    lenient = read_mooncake(path, skip_invalid=True)
    with path.open(encoding="utf-8") as fh:
        non_blank = sum(1 for line in fh if line.strip())
    assert lenient.skipped + len(lenient.requests) == non_blank


# (file, requests, rate_per_s, token-weighted hit with an infinite cache) of the bundled samples
# (fixtures/traces/, always here) and of the full public traces (../shared/data/README.md: about
# 37% and 65%), which only run where that folder exists: a fresh clone has the samples only.
MOONCAKE_FACTS = [
    (SAMPLES / "mooncake_conversation_sample.jsonl", 200, 2.7778, 0.0593),
    (SAMPLES / "mooncake_synthetic_sample.jsonl", 200, 3.4187, 0.0619),
] + ([
    (CONVERSATION, 12_031, 3.4, 0.37),
    (SYNTHETIC, 3_993, None, 0.65),
] if CONVERSATION.exists() else [])  # fmt: skip


@pytest.mark.parametrize(("path", "requests", "rate", "hit"), MOONCAKE_FACTS,
                         ids=lambda v: v.name if isinstance(v, Path) else None)  # fmt: skip
def test_mooncake_trace_hit_rates(
    path: Path, requests: int, rate: float | None, hit: float
) -> None:
    trace = read_trace(path)
    infinite = trace_stats(trace.requests, block_size=trace.block_size)
    small = trace_stats(trace.requests, block_size=trace.block_size, cache_tokens=20_000)

    assert infinite.requests == requests
    if rate is not None:
        assert infinite.rate_per_s == pytest.approx(rate, abs=0.05)
    assert infinite.token_weighted_hit == pytest.approx(hit, abs=0.01 if requests > 200 else 1e-4)
    assert small.token_weighted_hit < infinite.token_weighted_hit
    assert small.evicted_blocks > 0


AZURE_FILES = [(SAMPLES / "azure_conv_2023_sample.csv", 200)] + (
    [(AZURE, 19_366)] if AZURE.exists() else []
)


@pytest.mark.parametrize(("path", "requests"), AZURE_FILES,
                         ids=lambda v: v.name if isinstance(v, Path) else None)  # fmt: skip
def test_azure_trace_reads_whole_without_prefix_information(path: Path, requests: int) -> None:
    trace = read_trace(path)

    assert len(trace.requests) == requests
    assert trace.skipped == 0
    assert trace_stats(trace.requests, block_size=None).token_weighted_hit == 0


def test_the_shipped_full_mooncake_trace_reads_from_xz_like_the_plain_file() -> None:
    # The scenario's default workload: the whole conversation trace, compressed in fixtures.
    shipped = read_trace(SAMPLES / "mooncake_conversation_trace.jsonl.xz")
    assert shipped.format == "mooncake"
    assert len(shipped.requests) == 12_031
    sample = read_trace(SAMPLES / "mooncake_conversation_sample.jsonl")
    assert shipped.requests[:200] == sample.requests
    if CONVERSATION.exists():
        assert shipped.requests == read_trace(CONVERSATION).requests
