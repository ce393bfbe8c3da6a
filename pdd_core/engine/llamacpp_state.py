"""llama.cpp's per-sequence KV state bytes, cut into per-block pieces and joined again.

``llama_state_seq_get_data`` returns one opaque blob for a sequence; the data plane ships KV in
blocks of ``block_size`` tokens, caches them by hash and reassembles chains whose blocks came
from different requests. So the blob is parsed into its cells, sorted by position, and each
block becomes a small blob of the same format holding just its cells; the receiver parses the
blocks, checks they agree, and joins them into one blob for ``llama_state_seq_set_data`` (which
clears the destination sequence first, so a chain is loaded in one call).

The format is llama.cpp's internal, unversioned KV serialisation (``llama_kv_cache::state_write``
in ``src/llama-kv-cache.cpp``), pinned by the ``llama-cpp-python`` version in ``pyproject.toml``
and by a parse test. Little-endian throughout:

- ``u32 magic`` (``0xaf143cd8``), ``i32 seq_id`` (the sender's; the receiver ignores it);
- ``u32 n_stream`` (1: the engine runs a unified KV cache), ``u32 cell_count``;
- per cell: ``i32 pos``, ``u32 n_seq_id`` (1), ``i32 seq_id``;
- ``u32 v_trans``, ``u32 n_layer``;
- per layer: ``i32 k_type``, ``u64 k_row_bytes``, then one K row per cell;
- per layer, V: untransposed as for K (``i32 v_type``, ``u64 v_row_bytes``, rows); transposed
  (no flash attention) ``i32 v_type``, ``u32 element_bytes``, ``u32 n_embd_v``, then for each of
  the ``n_embd_v`` elements, that element of every cell.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pdd_core.errors import PddError

U8 = NDArray[np.uint8]
_META = np.dtype([("pos", "<i4"), ("n_seq", "<u4"), ("seq", "<i4")])
MAGIC = 0xAF143CD8  # llama-context.cpp ``io_magic`` of per-sequence state


class StateFormatError(PddError, ValueError):
    """The bytes are not a single-stream, single-sequence llama.cpp KV state of this version."""


@dataclass(frozen=True, slots=True)
class LayerFormat:
    """How one layer's K or V is stored: ggml type id and per-cell layout."""

    type_id: int
    row_bytes: int  # bytes of one cell's row (K, or V untransposed)
    element_bytes: int = 0  # transposed V only
    elements: int = 0  # transposed V only: n_embd_v


Layout = tuple[bool, tuple[LayerFormat, ...], tuple[LayerFormat, ...]]


@dataclass(frozen=True, slots=True)
class KVState:
    """One sequence's KV cells in position order, with the format that says how to write them.

    ``keys[layer]`` is ``(cells, row_bytes)``; ``values[layer]`` is ``(cells, row_bytes)``
    untransposed or ``(elements, cells, element_bytes)`` transposed.
    """

    positions: NDArray[np.int32]
    v_trans: bool
    k_formats: tuple[LayerFormat, ...]
    v_formats: tuple[LayerFormat, ...]
    keys: tuple[U8, ...]
    values: tuple[U8, ...]

    @property
    def cells(self) -> int:
        return len(self.positions)

    @property
    def layout(self) -> Layout:
        """Everything two states must share to be joined (types, sizes, transposition)."""
        return self.v_trans, self.k_formats, self.v_formats

    def slice(self, start: int, stop: int) -> KVState:
        """Cells ``start .. stop`` (indices into position order) as a state of their own."""
        values = tuple(v[:, start:stop] if self.v_trans else v[start:stop] for v in self.values)
        return KVState(
            self.positions[start:stop],
            self.v_trans,
            self.k_formats,
            self.v_formats,
            tuple(k[start:stop] for k in self.keys),
            values,
        )


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.offset = 0

    def take(self, count: int) -> memoryview:
        end = self.offset + count
        if count < 0 or end > len(self.data):
            raise StateFormatError(f"truncated at byte {self.offset}: needs {count} more")
        chunk = self.data[self.offset : end]
        self.offset = end
        return chunk

    def unpack(self, fmt: str) -> tuple[int, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))

    def array(self, count: int, shape: tuple[int, ...]) -> U8:
        return np.frombuffer(self.take(count), dtype=np.uint8).reshape(shape)


def parse(data: bytes) -> KVState:
    """Parse a sequence's state blob; cells come back sorted by position."""
    reader = _Reader(data)
    magic, _sender_seq, n_stream, cells = reader.unpack("<IiII")
    if magic != MAGIC:
        raise StateFormatError(f"magic {magic:#x} is not llama.cpp's sequence state {MAGIC:#x}")
    if n_stream != 1:
        raise StateFormatError(f"n_stream is {n_stream}: the engine needs a unified KV cache")
    meta = np.frombuffer(reader.take(cells * _META.itemsize), dtype=_META)
    if cells and not (meta["n_seq"] == 1).all():
        raise StateFormatError("a cell belongs to more than one sequence")
    if cells == 0:
        if reader.offset != len(data):
            raise StateFormatError("bytes after an empty state")
        return KVState(np.zeros(0, np.int32), False, (), (), (), ())
    v_trans, n_layer = reader.unpack("<II")
    if v_trans not in (0, 1) or not 0 < n_layer <= 4096:
        raise StateFormatError(f"implausible header: v_trans {v_trans}, {n_layer} layers")
    k_formats, keys = [], []
    for _ in range(n_layer):
        type_id, row = reader.unpack("<iQ")
        k_formats.append(LayerFormat(type_id, row))
        keys.append(reader.array(cells * row, (cells, row)))
    v_formats, values = [], []
    for _ in range(n_layer):
        if v_trans:
            type_id, element, elements = reader.unpack("<iII")
            v_formats.append(LayerFormat(type_id, element * elements, element, elements))
            values.append(reader.array(cells * element * elements, (elements, cells, element)))
        else:
            type_id, row = reader.unpack("<iQ")
            v_formats.append(LayerFormat(type_id, row))
            values.append(reader.array(cells * row, (cells, row)))
    if reader.offset != len(data):
        raise StateFormatError(f"{len(data) - reader.offset} unexpected bytes after the state")
    order = np.argsort(meta["pos"], kind="stable")
    state = KVState(
        meta["pos"].astype(np.int32),
        bool(v_trans),
        tuple(k_formats),
        tuple(v_formats),
        tuple(keys),
        tuple(values),
    )
    if (order == np.arange(cells)).all():
        return state
    return KVState(
        state.positions[order],
        state.v_trans,
        state.k_formats,
        state.v_formats,
        tuple(k[order] for k in keys),
        tuple(v[:, order] if v_trans else v[order] for v in values),
    )


def serialize(state: KVState) -> bytes:
    """The blob of ``state`` in llama.cpp's format (what ``llama_state_seq_set_data`` reads)."""
    cells = state.cells
    meta = np.zeros(cells, dtype=_META)
    meta["pos"], meta["n_seq"], meta["seq"] = state.positions, 1, 0
    parts = [struct.pack("<IiII", MAGIC, 0, 1, cells), meta.tobytes()]
    if cells == 0:
        return b"".join(parts)
    parts.append(struct.pack("<II", int(state.v_trans), len(state.k_formats)))
    for fmt, keys in zip(state.k_formats, state.keys, strict=True):
        parts += [struct.pack("<iQ", fmt.type_id, fmt.row_bytes), keys.tobytes()]
    for fmt, values in zip(state.v_formats, state.values, strict=True):
        if state.v_trans:
            parts.append(struct.pack("<iII", fmt.type_id, fmt.element_bytes, fmt.elements))
        else:
            parts.append(struct.pack("<iQ", fmt.type_id, fmt.row_bytes))
        parts.append(values.tobytes())
    return b"".join(parts)


# Exponent bits of each KV type's values (ggml type id -> (word dtype, mask, bytes per block,
# bytes of the block's float part)): a value is NaN or infinite when all its exponent bits are
# set. q8_0 stores blocks of an f16 scale and 32 int8 values; only the scale can be non-finite.
_FLOAT_BITS: dict[int, tuple[str, int, int, int]] = {
    0: ("<u4", 0x7F800000, 4, 4),  # f32
    1: ("<u2", 0x7C00, 2, 2),  # f16
    30: ("<u2", 0x7F80, 2, 2),  # bf16
    8: ("<u2", 0x7C00, 34, 2),  # q8_0
}


def non_finite(state: KVState) -> bool:
    """Whether any K or V value is NaN or infinite (types without a known layout: False).

    llama.cpp's attention reads every cell of the cache in range and masks the ones of other
    sequences by adding -inf to their scores, which does not cancel a NaN: one non-finite value
    in a freed cell would poison every later request of the process. Corrupt KV must be refused.
    """
    pairs = list(zip(state.k_formats, state.keys, strict=True))
    pairs += list(zip(state.v_formats, state.values, strict=True))
    for fmt, data in pairs:
        bits = _FLOAT_BITS.get(fmt.type_id)
        if bits is None or data.size == 0:
            continue
        dtype, mask, block, head = bits
        raw = np.ascontiguousarray(data).reshape(-1, block)[:, :head]
        words = np.ascontiguousarray(raw).view(dtype)
        if ((words & mask) == mask).any():
            return True
    return False


def split(data: bytes, block_size: int, start_block: int = 0) -> list[bytes]:
    """Blobs of blocks ``start_block ..`` of a sequence (positions ``0 .. n-1``, in order)."""
    state = parse(data)
    expected = np.arange(state.cells, dtype=np.int32)
    if not (state.positions == expected).all():
        raise StateFormatError("positions are not 0 .. n-1: the sequence has gaps")
    return [
        serialize(state.slice(start, min(start + block_size, state.cells)))
        for start in range(start_block * block_size, state.cells, block_size)
    ]


def join(blocks: Sequence[bytes]) -> KVState:
    """One state from consecutive block blobs (``serialize`` it for ``..._set_data``).

    Raises ``StateFormatError`` if a block is malformed, if two blocks disagree on the layout
    (KV types, row sizes, V transposition), or if positions do not run ``0 .. n-1``.
    """
    states = [parse(block) for block in blocks]
    if not states:
        raise StateFormatError("no blocks")
    layout = states[0].layout
    for index, state in enumerate(states):
        if state.layout != layout:
            raise StateFormatError(f"block {index}: KV layout differs from block 0")
    joined = KVState(
        np.concatenate([s.positions for s in states]),
        layout[0],
        layout[1],
        layout[2],
        tuple(np.concatenate(k) for k in zip(*(s.keys for s in states), strict=True)),
        tuple(
            np.concatenate(v, axis=1 if layout[0] else 0)
            for v in zip(*(s.values for s in states), strict=True)
        ),
    )
    if not (joined.positions == np.arange(joined.cells, dtype=np.int32)).all():
        raise StateFormatError("block positions do not run 0 .. n-1")
    if non_finite(joined):
        raise StateFormatError("KV holds NaN or infinite values (a corrupt block)")
    return joined
