"""The bounded per-request journal every agent keeps on local disk.

Each request leaves one JSON line: a ``pdd_core.records.RequestRecord`` (the control plane's
``POST /api/v1/telemetry/records/`` record), so the shipper sends the lines as they are. The
journal must never fill a disk while the control plane is unreachable: it is two segment files
of at most half the budget each; when the current one is full the older one is deleted and its
records not yet shipped are counted as dropped (the oldest go first, and the
loss is visible in the agent's heartbeat).

Only the gateway's journal is shipped to the control plane (``Journal`` is the shipper's
``RecordSource``): its record of a request is the complete one. The P, RLD and MD agents keep
their partial records local (for debugging); they share the gateway's request id, so the
control plane would deduplicate them away anyway.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pdd_core.agent.shipper import RecordSource


class Journal:
    """JSON lines in ``DIR/NAME.jsonl`` (current) and ``NAME.1.jsonl`` (older), bounded in bytes.

    A durable *shipped cursor* says how far the control plane has the records: segments are
    numbered (the current one is ``seq``, the older ``seq - 1``) and the cursor is a
    ``(segment, line)`` position; everything before it has been delivered. Both live in
    ``NAME.state.json`` with the drop count, written atomically (temp file + rename), so a
    restart resumes shipping where it stopped. When rotation deletes the older segment, only
    its records at or after the cursor (never delivered) count as dropped. The state is saved
    *before* the segment files are renamed: a crash in between makes the agent send some
    records again (the control plane ignores duplicates by request id) rather than lose them.
    """

    def __init__(self, directory: Path | str, name: str, max_bytes: int) -> None:
        if max_bytes < 2:
            raise ValueError("max_bytes: must be at least 2")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.current = self.directory / f"{name}.jsonl"
        self.older = self.directory / f"{name}.1.jsonl"
        self.state_path = self.directory / f"{name}.state.json"
        self.segment_bytes = max_bytes // 2
        self.dropped, self.seq, self.cursor = self._load_state()
        self._size = self.current.stat().st_size if self.current.exists() else 0
        self._count = _lines(self.current)
        self._older_count = _lines(self.older)
        self._in_flight: list[tuple[int, int]] = []

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one record; rotates (dropping the oldest segment) when the current one is full."""
        line = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
        data = line.encode()
        if len(data) > self.segment_bytes:
            self.dropped += 1
            self._save_state()
            return
        if self._size + len(data) > self.segment_bytes:
            self.dropped += self._older_count - self._shipped_in(self.seq - 1, self._older_count)
            self.cursor = max(self.cursor, (self.seq, 0))
            self.seq += 1
            self._save_state()
            if self.current.exists():
                os.replace(self.current, self.older)
            self._older_count, self._count, self._size = self._count, 0, 0
        with self.current.open("ab") as handle:
            handle.write(data)
        self._size += len(data)
        self._count += 1

    def records(self) -> list[dict[str, Any]]:
        """Every kept record, oldest first."""
        out: list[dict[str, Any]] = []
        for path in (self.older, self.current):
            if path.exists():
                out.extend(json.loads(line) for line in path.read_text().splitlines() if line)
        return out

    def _shipped_in(self, segment: int, count: int) -> int:
        """How many of the ``count`` lines of ``segment`` the cursor has passed."""
        if self.cursor[0] > segment:
            return count
        if self.cursor[0] == segment:
            return min(self.cursor[1], count)
        return 0

    @property
    def budget_remaining_bytes(self) -> int:
        """Bytes that may still be appended before a record not yet delivered is dropped.

        The next rotation deletes the older segment: if it holds undelivered records, only the
        room left in the current one remains; otherwise a whole further segment does too.
        """
        room = self.segment_bytes - self._size
        older_pending = self._older_count > self._shipped_in(self.seq - 1, self._older_count)
        return room if older_pending else room + self.segment_bytes

    @property
    def pending_count(self) -> int:
        """Records kept on disk and not yet delivered to the control plane."""
        older = self._older_count - self._shipped_in(self.seq - 1, self._older_count)
        return older + self._count - self._shipped_in(self.seq, self._count)

    def pending(self, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` undelivered records, oldest first (``RecordSource`` for the shipper).

        Their positions are remembered so that ``delivered`` advances the cursor past exactly
        these records even if a rotation happened while the batch was in flight.
        """
        out: list[dict[str, Any]] = []
        positions: list[tuple[int, int]] = []
        for segment, path, count in (
            (self.seq - 1, self.older, self._older_count),
            (self.seq, self.current, self._count),
        ):
            start = self._shipped_in(segment, count)
            if start >= count or not path.exists() or len(out) >= limit:
                continue
            with path.open("rb") as handle:
                for index, raw in enumerate(handle):
                    if index < start:
                        continue
                    if len(out) >= limit or index >= count:
                        break
                    try:
                        out.append(json.loads(raw))
                    except ValueError:  # a torn last line after a crash: skip it
                        out.append({"request_id": "", "malformed": True})
                    positions.append((segment, index))
        self._in_flight = positions
        return out

    def delivered(self, count: int) -> None:
        """The first ``count`` records of the last ``pending`` reached the control plane."""
        done, self._in_flight = self._in_flight[:count], []
        if not done:
            return
        # Records of a segment rotated away while in flight were counted as dropped; they
        # arrived after all, so they are not lost.
        self.dropped -= sum(1 for segment, _ in done if segment < self.seq - 1)
        segment, line = done[-1]
        self.cursor = max(self.cursor, (segment, line + 1))
        self._save_state()

    def _load_state(self) -> tuple[int, int, tuple[int, int]]:
        try:
            state = json.loads(self.state_path.read_text())
            dropped = int(state["dropped"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0, 1, (0, 0)
        try:
            seq = int(state.get("seq", 1))
            cursor = (int(state["cursor"][0]), int(state["cursor"][1]))
        except (KeyError, TypeError, ValueError, IndexError):
            seq, cursor = 1, (0, 0)
        return dropped, seq, cursor

    def _save_state(self) -> None:
        state = {"dropped": self.dropped, "seq": self.seq, "cursor": list(self.cursor)}
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state))
        os.replace(temporary, self.state_path)


class JournalSource(RecordSource):
    """A journal as the ``ReportShipper``'s record source (the gateway's only)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def pending(self, limit: int) -> list[Mapping[str, Any]]:
        return list(self.journal.pending(limit))

    def delivered(self, count: int) -> None:
        self.journal.delivered(count)


def _lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as handle:
        return sum(1 for _ in handle)
