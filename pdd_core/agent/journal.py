"""The bounded per-request journal every agent keeps on local disk.

Each served (or rejected) request leaves one JSON line whose fields are those of the control
plane's ``POST /api/v1/telemetry/records/`` record, so the next issue can ship the lines as
they are. The journal must never fill a disk while the control plane is unreachable: it is two
segment files of at most half the budget each; when the current one is full the older one is
deleted and its records are counted as dropped (the oldest go first, and the loss is visible).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RECORD_FIELDS = (
    "request_id",
    "tenant",
    "api_key_prefix",
    "model",
    "site",
    "pipeline",
    "arrival_time",
    "finish_time",
    "input_tokens",
    "hit_tokens",
    "miss_tokens",
    "output_tokens",
    "ttft_s",
    "tpot_s",
    "wan_bytes",
    "handoff_mode",
    "rld_tokens",
    "md_tokens",
    "sla_met",
    "rejected",
)


def iso(timestamp: float) -> str:
    """A UNIX time as the ISO 8601 UTC string the control plane parses."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


@dataclass(slots=True)
class RequestRecord:
    """One request as an agent saw it; ``to_json`` gives the control plane's record shape.

    ``role`` and ``agent`` are extra keys (the ingestion API ignores unknown keys): the
    gateway's record is the complete one, the other agents' records carry their own part.
    """

    request_id: str
    tenant: str
    model: str
    site: str
    pipeline: str
    arrival: float
    finish: float
    hit_tokens: int = 0
    miss_tokens: int = 0
    output_tokens: int = 0
    ttft_s: float | None = None
    tpot_s: float | None = None
    wan_bytes: int = 0
    handoff_mode: str = ""
    rld_tokens: int = 0
    md_tokens: int = 0
    sla_met: bool = True
    rejected: bool = False
    api_key_prefix: str = ""
    role: str = ""
    agent: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "tenant": self.tenant,
            "api_key_prefix": self.api_key_prefix,
            "model": self.model,
            "site": self.site,
            "pipeline": self.pipeline,
            "arrival_time": iso(self.arrival),
            "finish_time": iso(max(self.finish, self.arrival)),
            "input_tokens": self.hit_tokens + self.miss_tokens,
            "hit_tokens": self.hit_tokens,
            "miss_tokens": self.miss_tokens,
            "output_tokens": self.output_tokens,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "wan_bytes": self.wan_bytes,
            "handoff_mode": "" if self.handoff_mode == "none" else self.handoff_mode,
            "rld_tokens": self.rld_tokens,
            "md_tokens": self.md_tokens,
            "sla_met": self.sla_met,
            "rejected": self.rejected,
            "role": self.role,
            "agent": self.agent,
        }


class Journal:
    """JSON lines in ``DIR/NAME.jsonl`` (current) and ``NAME.1.jsonl`` (older), bounded in bytes."""

    def __init__(self, directory: Path | str, name: str, max_bytes: int) -> None:
        if max_bytes < 2:
            raise ValueError("max_bytes: must be at least 2")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.current = self.directory / f"{name}.jsonl"
        self.older = self.directory / f"{name}.1.jsonl"
        self.state_path = self.directory / f"{name}.state.json"
        self.segment_bytes = max_bytes // 2
        self.dropped = self._load_dropped()
        self._size = self.current.stat().st_size if self.current.exists() else 0
        self._count = _lines(self.current)
        self._older_count = _lines(self.older)

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one record; rotates (dropping the oldest segment) when the current one is full."""
        line = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
        data = line.encode()
        if len(data) > self.segment_bytes:
            self.dropped += 1
            self._save_dropped()
            return
        if self._size + len(data) > self.segment_bytes:
            self.dropped += self._older_count
            if self.current.exists():
                os.replace(self.current, self.older)
            self._older_count, self._count, self._size = self._count, 0, 0
            self._save_dropped()
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

    def _load_dropped(self) -> int:
        try:
            return int(json.loads(self.state_path.read_text())["dropped"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

    def _save_dropped(self) -> None:
        self.state_path.write_text(json.dumps({"dropped": self.dropped}))


def _lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as handle:
        return sum(1 for _ in handle)
