"""Readers for the public trace formats, all producing the same ``Request`` records.

- Mooncake JSON lines (kvcache-ai/Mooncake FAST'25 traces): ``timestamp`` in ms from the start,
  ``input_length``, ``output_length``, ``hash_ids`` over 512-token blocks. Our generator writes
  the same format with optional ``id``, ``session``, ``tenant`` and ``turn`` keys, which this
  reader also accepts.
- Qwen-Bailian JSON lines (Alibaba usage traces): ``chat_id``, ``parent_chat_id`` (-1 for a
  root), ``timestamp`` in seconds, ``input_length``, ``output_length``, ``type``, ``turn``,
  ``hash_ids`` over 16-token blocks. A chat's session is the root of its parent chain; ``type``
  is not kept, as nothing downstream uses it.
- Azure LLM inference CSV (Azure/AzurePublicDataset): ``TIMESTAMP``, ``ContextTokens``,
  ``GeneratedTokens``; no prefix information, so no reuse. Arrival times become seconds since
  the first valid row.

A malformed line raises ``TraceFormatError`` naming the path, line and field, so a bad trace is
fixed in seconds; with ``skip_invalid=True`` it is dropped and counted in ``Trace.skipped``
instead. Blank lines are ignored. Readers keep file order and do not sort.
"""

from __future__ import annotations

import csv
import json
import lzma
import math
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from pdd_core.workload.request import Request, Trace, TraceFormatError

FORMATS: tuple[str, ...] = ("mooncake", "qwen", "azure")

# Tokens per hash id, as published with each trace family (see the module docstring).
DEFAULT_BLOCK_SIZE: Mapping[str, int] = {"mooncake": 512, "qwen": 16}

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class _FieldError(Exception):
    """Raised inside a line parser; the loop adds path and line number."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


def open_text(path: Path, newline: str | None = None) -> IO[str]:
    """Open a trace for reading as text; ``.xz`` files are decompressed on the fly, so a full
    public trace can ship in the repository compressed (the Mooncake conversation trace is 3 MB
    as text, 0.2 MB as xz) and be read like the plain file."""
    if path.suffix.lower() == ".xz":
        return lzma.open(path, "rt", encoding="utf-8", newline=newline)
    return path.open(encoding="utf-8", newline=newline)


def detect_format(path: Path | str) -> str:
    """Guess a trace's format: ``.csv`` is Azure; JSON lines with ``chat_id`` are Qwen.

    Lets ``pdd trace stats FILE`` work without ``--format`` on every file we know of.
    """
    path = Path(path)
    name = path.name.lower().removesuffix(".xz")
    if name.endswith(".csv"):
        return "azure"
    with open_text(path) as fh:
        for line in fh:
            if line.strip():
                try:
                    first = json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    return "mooncake"  # let the reader report the line properly
                return "qwen" if isinstance(first, dict) and "chat_id" in first else "mooncake"
    return "mooncake"


def read_trace(
    path: Path | str,
    format: str | None = None,
    *,
    skip_invalid: bool = False,
    block_size: int | None = None,
) -> Trace:
    """Read a trace in any supported format (detected when ``format`` is None).

    ``block_size`` overrides the format's tokens per hash (512 Mooncake, 16 Qwen).
    """
    path = Path(path)
    fmt = format or detect_format(path)
    if fmt == "mooncake":
        return read_mooncake(path, skip_invalid=skip_invalid, block_size=block_size or 512)
    if fmt == "qwen":
        return read_qwen(path, skip_invalid=skip_invalid, block_size=block_size or 16)
    if fmt == "azure":
        return read_azure(path, skip_invalid=skip_invalid)
    raise ValueError(f"format: must be one of {', '.join(FORMATS)}, got {fmt!r}")


def read_mooncake(path: Path | str, *, skip_invalid: bool = False, block_size: int = 512) -> Trace:
    """Read Mooncake JSON lines (timestamps in milliseconds) into requests."""
    path = Path(path)

    def parse(obj: Mapping[str, Any], lineno: int) -> Request:
        session = obj.get("session")
        return Request(
            id=_text(obj, "id") if "id" in obj else str(lineno),
            arrival_s=_number(obj, "timestamp") / 1000.0,
            input_tokens=_integer(obj, "input_length", 1),
            output_tokens=_integer(obj, "output_length", 0),
            block_hashes=_hashes(obj),
            session=None if session is None else _text(obj, "session"),
            tenant=_text(obj, "tenant") if "tenant" in obj else "default",
            turn=_integer(obj, "turn", 1) if "turn" in obj else 1,
        )

    requests, skipped = _read_json_lines(path, parse, skip_invalid)
    return Trace(path, "mooncake", requests, block_size, skipped)


def read_qwen(path: Path | str, *, skip_invalid: bool = False, block_size: int = 16) -> Trace:
    """Read Qwen-Bailian JSON lines (timestamps in seconds) into requests."""
    path = Path(path)
    # chat id -> session (the root of its parent chain), filled as chats appear in time order.
    sessions: dict[int, str] = {}

    def parse(obj: Mapping[str, Any], lineno: int) -> Request:
        chat_id = _integer(obj, "chat_id", 0)
        parent = _integer(obj, "parent_chat_id", -1)
        request = Request(
            id=str(chat_id),
            arrival_s=_number(obj, "timestamp"),
            input_tokens=_integer(obj, "input_length", 1),
            output_tokens=_integer(obj, "output_length", 0),
            block_hashes=_hashes(obj),
            # A parent missing from a trimmed trace still names the conversation it belongs to.
            session=str(chat_id) if parent == -1 else sessions.get(parent, str(parent)),
            turn=_integer(obj, "turn", 1) if "turn" in obj else 1,
        )
        sessions[chat_id] = request.session or str(chat_id)
        return request

    requests, skipped = _read_json_lines(path, parse, skip_invalid)
    return Trace(path, "qwen", requests, block_size, skipped)


def read_azure(path: Path | str, *, skip_invalid: bool = False) -> Trace:
    """Read an Azure LLM inference CSV into requests without block hashes (no reuse)."""
    path = Path(path)
    requests: list[Request] = []
    skipped = 0
    start: datetime | None = None
    with open_text(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            return Trace(path, "azure", (), None, 0)
        columns = [name.strip() for name in header]
        for name in AZURE_COLUMNS:
            if name not in columns:
                raise TraceFormatError(path, 1, name, "missing column in the header")
        index = {name: columns.index(name) for name in AZURE_COLUMNS}
        for row in reader:
            lineno = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            try:
                cells = {name: _cell(row, i, name) for name, i in index.items()}
                stamp = _timestamp(cells["TIMESTAMP"])
                context = _integer(_parsed(cells, "ContextTokens"), "ContextTokens", 1)
                generated = _integer(_parsed(cells, "GeneratedTokens"), "GeneratedTokens", 0)
            except _FieldError as exc:
                if not skip_invalid:
                    raise TraceFormatError(path, lineno, exc.field, exc.reason) from None
                skipped += 1
                continue
            if start is None:
                start = stamp
            requests.append(
                Request(
                    id=str(lineno),
                    arrival_s=(stamp - start).total_seconds(),
                    input_tokens=context,
                    output_tokens=generated,
                )
            )
    return Trace(path, "azure", tuple(requests), None, skipped)


def _read_json_lines(
    path: Path,
    parse: Callable[[Mapping[str, Any], int], Request],
    skip_invalid: bool,
) -> tuple[tuple[Request, ...], int]:
    requests: list[Request] = []
    skipped = 0
    for lineno, obj in _json_objects(path):
        try:
            if isinstance(obj, _FieldError):
                raise obj
            requests.append(parse(obj, lineno))
        except _FieldError as exc:
            if not skip_invalid:
                raise TraceFormatError(path, lineno, exc.field, exc.reason) from None
            skipped += 1
    return tuple(requests), skipped


def _json_objects(path: Path) -> Iterator[tuple[int, Mapping[str, Any] | _FieldError]]:
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                yield lineno, _FieldError("json", f"not valid JSON ({exc.msg})")
                continue
            except RecursionError:  # the decoder recurses per nesting level
                yield lineno, _FieldError("json", "nested too deeply to be a trace record")
                continue
            if not isinstance(obj, dict):
                yield lineno, _FieldError("json", "expected a JSON object")
                continue
            yield lineno, obj


def _field(obj: Mapping[str, Any], name: str) -> Any:
    if name not in obj:
        raise _FieldError(name, "missing")
    return obj[name]


def _number(obj: Mapping[str, Any], name: str) -> float:
    value = _field(obj, name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _FieldError(name, f"expected a number, got {value!r}")
    if value < 0:
        raise _FieldError(name, f"must be non-negative, got {value!r}")
    return float(value)


def _integer(obj: Mapping[str, Any], name: str, minimum: int) -> int:
    value = _field(obj, name)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _FieldError(name, f"expected an integer, got {value!r}")
    number: int = value
    if number < minimum:
        raise _FieldError(name, f"must be at least {minimum}, got {number}")
    return number


def _text(obj: Mapping[str, Any], name: str) -> str:
    value = _field(obj, name)
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise _FieldError(name, f"expected a non-empty string or integer, got {value!r}")
    return str(value)


def _hashes(obj: Mapping[str, Any]) -> tuple[int, ...]:
    value = _field(obj, "hash_ids")
    if not isinstance(value, list):
        raise _FieldError("hash_ids", f"expected a list of integers, got {type(value).__name__}")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise _FieldError("hash_ids", f"expected integers, got {item!r}")
    return tuple(value)


def _parsed(cells: Mapping[str, str], name: str) -> dict[str, int]:
    # CSV cells arrive as text; JSON integers must not (a quoted "600" is a malformed field).
    text = cells[name]
    try:
        return {name: int(text.strip())}
    except ValueError:
        raise _FieldError(name, f"expected an integer, got {text!r}") from None


def _cell(row: list[str], index: int, name: str) -> str:
    if index >= len(row):
        raise _FieldError(name, "missing")
    return row[index]


def _timestamp(text: str) -> datetime:
    # Azure writes 7 fractional digits (100 ns); datetime holds microseconds, so keep 6
    # explicitly rather than depend on how a Python version treats the extra digit.
    value = text.strip()
    head, dot, fraction = value.partition(".")
    if dot and len(fraction) > 6:
        value = f"{head}.{fraction[:6]}"
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise _FieldError("TIMESTAMP", f"expected a date and time, got {text!r}") from None
