"""The wire protocol between data-plane agents: versioned, length-prefixed binary frames.

Gateway, P, RLD and MD agents exchange control messages (a request, a stream of tokens, a
token-ID handoff) and bulk KV blocks over long-lived TCP connections, one of which crosses the
WAN (through the emulator or a real line). One framing serves both, so a single reader loop per
connection handles everything and a KV block never needs base64 or a second socket.

A frame is a fixed header, the request id, then the payload::

    magic  "PDDW"   4 bytes   rejects a peer that is not speaking this protocol at all
    version         u8        rejects an incompatible peer instead of misreading it
    type            u8        FrameType
    flags           u16       FLAG_* bits (e.g. the last frame of a stream)
    id length       u16       bytes of the UTF-8 request id that follows (0 = connection-level)
    payload length  u32       bytes of payload that follow the request id
    request id      bytes
    payload         bytes     a JSON object for control frames; raw bytes for KV_BLOCK

All integers are big-endian. Both lengths are checked against explicit maxima *before* any
payload is read, so a hostile or corrupt length cannot make a reader allocate gigabytes. Every
malformed or unexpected frame raises ``ProtocolError``; an agent catches it, logs the reason and
closes that one connection (see docs/dataplane.md).
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from pdd_core.errors import PddError

MAGIC = b"PDDW"
VERSION = 1
HEADER = struct.Struct("!4sBBHHI")
HEADER_SIZE = HEADER.size  # 14 bytes
MAX_REQUEST_ID_BYTES = 256
# One KV block of a large model at a large block size is a few tens of MB (512 tokens x 70 KB);
# 64 MiB bounds a frame while leaving room for that. Readers may pass a smaller bound.
DEFAULT_MAX_PAYLOAD = 64 * 1024 * 1024

FLAG_END_OF_STREAM = 0x0001  # the last frame of this request's stream on this connection
KNOWN_FLAGS = FLAG_END_OF_STREAM

# KV_BLOCK payload: block hash (u64), block index (u32), token count (u32), then that many token
# ids (u32 each), then the block's KV bytes. The tokens travel with the block so the receiver can
# verify the hash chain and rebuild the sequence without a separate control message.
KV_BLOCK_HEADER = struct.Struct("!QII")
TOKEN_ID = struct.Struct("!I")


class ProtocolError(PddError):
    """A frame is malformed, too large, of an unknown version or type, or not expected here."""


class FrameType(IntEnum):
    """What a frame means. Values are part of the wire format: never renumber, only append."""

    HELLO = 1  # {role, agent_id, model, version}: first frame on every connection
    HELLO_ACK = 2  # {role, agent_id}
    GENERATE = 3  # gateway -> P: {prompt_tokens, max_tokens, pipeline, handoff_mode, ...}
    KV_QUERY = 4  # P -> MD: {block_hashes}: which leading blocks does MD's DRC hold?
    KV_HAVE = 5  # MD -> P: {blocks[, update]}: leading blocks MD holds (update: more now)
    KV_BLOCK = 6  # raw: one KV block (see KV_BLOCK_HEADER)
    KV_DONE = 7  # {blocks, tokens, first_token}: all blocks of the request were sent
    TOKENS = 8  # {tokens, index}: output token ids from position ``index`` on
    HANDOFF = 9  # RLD -> MD: {tokens, start, final}: token IDs for MD to extend over
    HANDOFF_ACK = 10  # MD -> RLD: {absorbed}: MD has the KV of the first ``absorbed`` outputs
    CANCEL = 11  # {reason}: abandon the request everywhere
    ERROR = 12  # {code, message}: the request failed at the sender
    PING = 13  # {}: liveness probe on an idle connection
    PONG = 14  # {}
    CACHE_EVENT = 15  # P, MD -> gateway: {added, removed}: block hashes entering/leaving a cache
    WATCH = 16  # RLD -> MD: {}: answer HANDOFF_ACK{absorbed: 0} once the prefill KV is in
    PREFILLED = 17  # P -> gateway: {}: the prefill pass ended; the KV transfers start now
    KV_LANDED = 18  # MD -> gateway: {}: the request's KV is in MD (its WAN transfer ended)
    # gateway -> P, answering a P-MD request's PREFILLED: {rld}: ship the KV to relay ``rld``
    # too (the request goes P-RLD-MD), or {rld: null}: P-MD stands
    RELAY_CHECK = 19


CONTROL_TYPES = frozenset(t for t in FrameType if t is not FrameType.KV_BLOCK)


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame: control frames carry ``body`` (a JSON object), KV blocks ``data``.

    Keeping the two apart (rather than raw payload bytes everywhere) means a control frame's
    JSON is validated once, where it is read, and handlers never see unparsed bytes.
    """

    type: FrameType
    request_id: str = ""
    body: Mapping[str, Any] = field(default_factory=dict)
    data: bytes = b""
    flags: int = 0

    @property
    def end_of_stream(self) -> bool:
        return bool(self.flags & FLAG_END_OF_STREAM)


@dataclass(frozen=True, slots=True)
class KVBlockPayload:
    """The contents of a KV_BLOCK frame: a block's identity, its tokens and its KV bytes."""

    block_hash: int
    index: int
    tokens: tuple[int, ...]
    data: bytes


def control(
    frame_type: FrameType,
    request_id: str = "",
    body: Mapping[str, Any] | None = None,
    *,
    flags: int = 0,
) -> Frame:
    """Build a control frame (anything but KV_BLOCK) with a JSON-object body."""
    if frame_type is FrameType.KV_BLOCK:
        raise ValueError("frame_type: KV_BLOCK carries raw bytes; use kv_block_frame")
    return Frame(type=frame_type, request_id=request_id, body=dict(body or {}), flags=flags)


def kv_block_frame(request_id: str, block: KVBlockPayload, *, flags: int = 0) -> Frame:
    """Build the KV_BLOCK frame of one exported block."""
    parts = [KV_BLOCK_HEADER.pack(block.block_hash, block.index, len(block.tokens))]
    parts.extend(TOKEN_ID.pack(t) for t in block.tokens)
    parts.append(block.data)
    return Frame(FrameType.KV_BLOCK, request_id, data=b"".join(parts), flags=flags)


def parse_kv_block(frame: Frame) -> KVBlockPayload:
    """The block a KV_BLOCK frame carries; ``ProtocolError`` if the frame is not one."""
    expect(frame, FrameType.KV_BLOCK)
    data = frame.data
    if len(data) < KV_BLOCK_HEADER.size:
        raise ProtocolError("KV_BLOCK payload shorter than its header")
    block_hash, index, count = KV_BLOCK_HEADER.unpack_from(data)
    end = KV_BLOCK_HEADER.size + count * TOKEN_ID.size
    if len(data) < end:
        raise ProtocolError(f"KV_BLOCK declares {count} tokens but carries fewer")
    tokens = struct.unpack_from(f"!{count}I", data, KV_BLOCK_HEADER.size)
    return KVBlockPayload(block_hash, index, tuple(tokens), bytes(data[end:]))


def expect(frame: Frame, *types: FrameType) -> Frame:
    """Return ``frame`` if its type is one of ``types``, else raise ``ProtocolError``.

    A handler states what it can accept in one line; anything else is a protocol violation
    that closes the connection rather than being silently ignored.
    """
    if frame.type not in types:
        wanted = ", ".join(t.name for t in types)
        raise ProtocolError(f"unexpected {frame.type.name} frame (expected {wanted})")
    return frame


def encode_frame(frame: Frame, *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> bytes:
    """Serialize a frame; raises ``ProtocolError`` if it would exceed the protocol's limits.

    Checking on the way out means an agent learns about an oversize block where it built it,
    not as a dropped connection on the peer.
    """
    rid = frame.request_id.encode("utf-8")
    if len(rid) > MAX_REQUEST_ID_BYTES:
        raise ProtocolError(f"request id is {len(rid)} bytes (max {MAX_REQUEST_ID_BYTES})")
    if frame.flags & ~KNOWN_FLAGS:
        raise ProtocolError(f"unknown flags 0x{frame.flags:04x}")
    if frame.type is FrameType.KV_BLOCK:
        payload = frame.data
    else:
        try:
            payload = json.dumps(frame.body, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"{frame.type.name} body is not JSON-serializable: {exc}") from None
    if len(payload) > max_payload:
        raise ProtocolError(f"payload is {len(payload)} bytes (max {max_payload})")
    header = HEADER.pack(MAGIC, VERSION, frame.type, frame.flags, len(rid), len(payload))
    return b"".join((header, rid, payload))


@dataclass(frozen=True, slots=True)
class _Header:
    type: FrameType
    flags: int
    id_length: int
    payload_length: int


def _parse_header(raw: bytes | memoryview, max_payload: int) -> _Header:
    magic, version, type_code, flags, id_length, payload_length = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise ProtocolError(f"bad magic {bytes(magic)!r}")
    if version != VERSION:
        raise ProtocolError(f"unsupported protocol version {version} (this side speaks {VERSION})")
    try:
        frame_type = FrameType(type_code)
    except ValueError:
        raise ProtocolError(f"unknown frame type {type_code}") from None
    if flags & ~KNOWN_FLAGS:
        raise ProtocolError(f"unknown flags 0x{flags:04x}")
    if id_length > MAX_REQUEST_ID_BYTES:
        raise ProtocolError(f"request id length {id_length} exceeds {MAX_REQUEST_ID_BYTES}")
    if payload_length > max_payload:
        raise ProtocolError(f"payload length {payload_length} exceeds {max_payload}")
    return _Header(frame_type, flags, id_length, payload_length)


def _build(header: _Header, rid: bytes, payload: bytes) -> Frame:
    try:
        request_id = rid.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("request id is not UTF-8") from None
    if header.type is FrameType.KV_BLOCK:
        return Frame(header.type, request_id, data=payload, flags=header.flags)
    try:
        body = json.loads(payload)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError(f"{header.type.name} payload is not valid JSON") from None
    if not isinstance(body, dict):
        raise ProtocolError(f"{header.type.name} payload is not a JSON object")
    return Frame(header.type, request_id, body=body, flags=header.flags)


def decode_frame(
    buffer: bytes | bytearray | memoryview, *, max_payload: int = DEFAULT_MAX_PAYLOAD
) -> tuple[Frame, int] | None:
    """Decode the first frame of ``buffer``: ``(frame, bytes consumed)``, or None if incomplete.

    Raises ``ProtocolError`` as soon as the bytes seen so far cannot start a valid frame, so a
    garbage stream is rejected after its first header, never buffered up to a length it claims.
    """
    view = memoryview(buffer)
    if len(view) < HEADER_SIZE:
        # Reject a wrong magic early even on a short read.
        prefix = bytes(view[: len(MAGIC)])
        if not MAGIC.startswith(prefix):
            raise ProtocolError(f"bad magic {prefix!r}")
        return None
    header = _parse_header(view, max_payload)
    end = HEADER_SIZE + header.id_length + header.payload_length
    if len(view) < end:
        return None
    rid = bytes(view[HEADER_SIZE : HEADER_SIZE + header.id_length])
    payload = bytes(view[HEADER_SIZE + header.id_length : end])
    return _build(header, rid, payload), end


async def read_frame(
    reader: asyncio.StreamReader, *, max_payload: int = DEFAULT_MAX_PAYLOAD
) -> Frame | None:
    """Read one frame; None on a clean end of stream between frames.

    An end of stream inside a frame is a ``ProtocolError`` (the peer died mid-message), so the
    caller's single ``except ProtocolError`` covers truncation as well as garbage.
    """
    try:
        raw = await reader.readexactly(HEADER_SIZE)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise ProtocolError("connection closed inside a frame header") from None
    header = _parse_header(raw, max_payload)
    try:
        rid = await reader.readexactly(header.id_length)
        payload = await reader.readexactly(header.payload_length)
    except asyncio.IncompleteReadError:
        raise ProtocolError("connection closed inside a frame") from None
    return _build(header, rid, payload)


async def write_frame(
    writer: asyncio.StreamWriter, frame: Frame, *, max_payload: int = DEFAULT_MAX_PAYLOAD
) -> int:
    """Write one frame and wait for the transport's buffer to drain; returns bytes written.

    Draining on every frame is the backpressure that stops a fast sender (P shipping KV)
    from buffering a whole request in memory while the WAN trickles it out.
    """
    encoded = encode_frame(frame, max_payload=max_payload)
    writer.write(encoded)
    await writer.drain()
    return len(encoded)


def token_ids(body: Mapping[str, Any], key: str = "tokens") -> list[int]:
    """The list of non-negative integer token ids under ``key``, or ``ProtocolError``.

    Token lists arrive from other processes; validating their shape here keeps a bad peer from
    reaching an engine with a string or a negative id.
    """
    value = body.get(key)
    # Checked at C speed (a prompt of 8K ids: 0.1 ms against 1.4 ms item by item in Python):
    # exact ints only (no bool, no float), then their range.
    if not isinstance(value, list) or (
        value and not (set(map(type, value)) == {int} and min(value) >= 0 and max(value) < 2**32)
    ):
        raise ProtocolError(f"{key!r} must be a list of non-negative 32-bit integers")
    return list(value)


def handoff_frame_size(tokens: Sequence[int], request_id: str = "r" * 36) -> int:
    """Bytes on the wire of a HANDOFF frame carrying ``tokens`` (for benches and the router).

    The default request id is a UUID's length, so the figure is what a real handoff costs.
    """
    frame = control(
        FrameType.HANDOFF, request_id, {"tokens": list(tokens), "start": 0, "final": True}
    )
    return len(encode_frame(frame))
