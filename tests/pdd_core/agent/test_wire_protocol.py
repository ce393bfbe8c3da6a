"""Wire frames: round trips, limits, and a parser that arbitrary bytes cannot crash."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.agent.protocol import (
    FLAG_END_OF_STREAM,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    MAX_REQUEST_ID_BYTES,
    VERSION,
    Frame,
    FrameType,
    KVBlockPayload,
    ProtocolError,
    control,
    decode_frame,
    encode_frame,
    expect,
    handoff_frame_size,
    kv_block_frame,
    parse_kv_block,
    read_frame,
    token_ids,
    write_frame,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
control_types = st.sampled_from([t for t in FrameType if t is not FrameType.KV_BLOCK])
request_ids = st.text(max_size=40)
flags = st.sampled_from([0, FLAG_END_OF_STREAM])


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    if draw(st.booleans()):
        block = KVBlockPayload(
            block_hash=draw(st.integers(0, 2**64 - 1)),
            index=draw(st.integers(0, 2**32 - 1)),
            tokens=tuple(draw(st.lists(st.integers(0, 2**32 - 1), max_size=20))),
            data=draw(st.binary(max_size=200)),
        )
        return kv_block_frame(draw(request_ids), block, flags=draw(flags))
    body = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
    return control(draw(control_types), draw(request_ids), body, flags=draw(flags))


@given(frames())
def test_decode_inverts_encode(frame: Frame) -> None:
    encoded = encode_frame(frame)

    decoded, consumed = decode_frame(encoded) or (None, 0)

    assert decoded == frame
    assert consumed == len(encoded)


@given(frames())
def test_kv_block_payload_round_trips(frame: Frame) -> None:
    if frame.type is not FrameType.KV_BLOCK:
        return
    decoded, _ = decode_frame(encode_frame(frame)) or (None, 0)
    assert decoded is not None

    assert kv_block_frame(frame.request_id, parse_kv_block(decoded), flags=frame.flags) == frame


@given(st.lists(frames(), min_size=1, max_size=4), st.integers(1, 64))
def test_a_stream_split_anywhere_decodes_to_the_same_frames(
    frames_: list[Frame], step: int
) -> None:
    stream = b"".join(encode_frame(f) for f in frames_)
    buffer = bytearray()
    out: list[Frame] = []
    for start in range(0, len(stream), step):
        buffer += stream[start : start + step]
        while (result := decode_frame(buffer)) is not None:
            frame, used = result
            out.append(frame)
            del buffer[:used]

    assert out == frames_
    assert not buffer


@settings(max_examples=500)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_protocol_error_or_need_more(data: bytes) -> None:
    try:
        result = decode_frame(data, max_payload=1024)
    except ProtocolError:
        return
    if result is not None:
        frame, used = result
        assert 0 < used <= len(data)
        assert isinstance(frame.type, FrameType)


@settings(max_examples=300)
@given(
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**32 - 1),
    st.binary(max_size=100),
)
def test_valid_magic_with_arbitrary_header_fields_never_crashes(
    version: int, type_code: int, flags_: int, id_len: int, payload_len: int, tail: bytes
) -> None:
    data = HEADER.pack(MAGIC, version, type_code, flags_, id_len, payload_len) + tail
    with contextlib.suppress(ProtocolError):
        decode_frame(data, max_payload=1024)


def _raw(type_code: int, rid: bytes, payload: bytes, *, version: int = VERSION) -> bytes:
    return HEADER.pack(MAGIC, version, type_code, 0, len(rid), len(payload)) + rid + payload


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"GET / HTTP/1.1\r\n\r\n", "bad magic"),
        (b"XY", "bad magic"),
        (_raw(FrameType.PING, b"", b"{}", version=2), "unsupported protocol version 2"),
        (_raw(99, b"", b"{}"), "unknown frame type 99"),
        (_raw(FrameType.PING, b"\xff\xfe", b"{}"), "request id is not UTF-8"),
        (_raw(FrameType.TOKENS, b"r1", b"[1, 2]"), "not a JSON object"),
        (_raw(FrameType.TOKENS, b"r1", b"{nope"), "not valid JSON"),
        (HEADER.pack(MAGIC, VERSION, FrameType.PING, 0x8000, 0, 2) + b"{}", "unknown flags"),
        (HEADER.pack(MAGIC, VERSION, FrameType.PING, 0, 0, 2049), "exceeds 2048"),
        (
            HEADER.pack(MAGIC, VERSION, FrameType.PING, 0, MAX_REQUEST_ID_BYTES + 1, 0),
            "request id length",
        ),
    ],
)
def test_malformed_frames_are_rejected_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        decode_frame(data, max_payload=2048)


def test_an_oversize_length_is_rejected_from_the_header_alone() -> None:
    header_only = HEADER.pack(MAGIC, VERSION, FrameType.KV_BLOCK, 0, 0, 2**32 - 1)

    with pytest.raises(ProtocolError, match="exceeds"):
        decode_frame(header_only)


def test_encoding_refuses_what_decoding_would_reject() -> None:
    with pytest.raises(ProtocolError, match="request id"):
        encode_frame(control(FrameType.PING, "x" * (MAX_REQUEST_ID_BYTES + 1)))
    with pytest.raises(ProtocolError, match="max 10"):
        encode_frame(control(FrameType.TOKENS, "r", {"tokens": list(range(10))}), max_payload=10)
    with pytest.raises(ProtocolError, match="JSON"):
        encode_frame(control(FrameType.TOKENS, "r", {"x": float("nan")}))


def test_header_is_fourteen_bytes_and_a_ping_is_sixteen() -> None:
    assert HEADER_SIZE == 14
    assert len(encode_frame(control(FrameType.PING))) == 16


def test_kv_block_with_fewer_tokens_than_declared_is_rejected() -> None:
    good = kv_block_frame("r", KVBlockPayload(7, 0, (1, 2, 3), b"kv"))
    truncated = Frame(FrameType.KV_BLOCK, "r", data=good.data[:16])

    with pytest.raises(ProtocolError, match="declares 3 tokens"):
        parse_kv_block(truncated)


def test_expect_names_the_unexpected_frame() -> None:
    frame = control(FrameType.TOKENS, "r")

    assert expect(frame, FrameType.TOKENS, FrameType.ERROR) is frame
    with pytest.raises(ProtocolError, match="unexpected TOKENS frame"):
        expect(frame, FrameType.HANDOFF)


def test_token_ids_validates_shape() -> None:
    assert token_ids({"tokens": [0, 5, 2**32 - 1]}) == [0, 5, 2**32 - 1]
    for bad in ([1, -1], [1, "2"], [True], "12", None, [2**32]):
        with pytest.raises(ProtocolError):
            token_ids({"tokens": bad})


def test_a_hundred_token_handoff_is_about_a_kilobyte_and_a_half() -> None:
    size = handoff_frame_size(list(range(30000, 30100)))

    assert 500 < size < 1600


async def _pipe() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, asyncio.AbstractServer]:
    received: asyncio.Queue[asyncio.StreamReader] = asyncio.Queue()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await received.put(reader)
        await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    reader = await asyncio.wait_for(received.get(), 5)
    return reader, writer, server


async def test_read_and_write_frame_over_a_socket() -> None:
    reader, writer, server = await _pipe()
    sent = [
        control(FrameType.HELLO, "", {"role": "MD", "version": VERSION}),
        kv_block_frame("req-1", KVBlockPayload(1, 0, (1, 2), b"\x00" * 4096)),
        control(FrameType.TOKENS, "req-1", {"tokens": [3], "index": 0}, flags=FLAG_END_OF_STREAM),
    ]
    for frame in sent:
        await write_frame(writer, frame)
    writer.close()

    got = [await read_frame(reader) for _ in sent]

    assert got == sent
    assert got[-1] is not None and got[-1].end_of_stream
    assert await read_frame(reader) is None  # clean end of stream between frames
    server.close()


async def test_read_frame_reports_a_truncated_frame() -> None:
    reader, writer, server = await _pipe()
    encoded = encode_frame(control(FrameType.TOKENS, "r", {"tokens": [1, 2, 3]}))
    writer.write(encoded[:-3])
    writer.close()

    with pytest.raises(ProtocolError, match="closed inside a frame"):
        await read_frame(reader)
    server.close()
