"""The report shipper: a gateway's journal of records to the control plane, exactly once.

``ReportShipper`` posts a ``RecordSource`` (the journal, ``agent/journal.py``) in batches to
``POST /api/v1/telemetry/records/`` through a ``ControlPlaneClient`` (``agent/control.py``)
and removes each batch from the source only once the control plane answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pdd_core.agent.control import (
    ControlPlaneClient,
    ControlPlaneError,
    ControlPlaneUnreachable,
    backoff_delays,
)

logger = logging.getLogger(__name__)


class RecordSource:
    """Where shipped records come from: the oldest unshipped first, removed once delivered."""

    def pending(self, limit: int) -> list[Mapping[str, Any]]:  # pragma: no cover - protocol
        raise NotImplementedError

    def delivered(self, count: int) -> None:  # pragma: no cover - protocol
        raise NotImplementedError


class ReportShipper:
    """Ships a record source to ``POST /api/v1/telemetry/records/`` in batches, exactly once.

    The control plane is idempotent by request id, so a batch whose answer was lost is simply
    sent again. A batch is removed from the source only when the control plane answered: new
    and duplicate records are delivered; records it rejected as invalid (per-record errors, or a
    400 for the whole batch) will never be accepted, so they are counted in ``rejected`` and set
    aside in the ``dead_letter`` file (JSON lines ``{"record", "error"}``, when given) rather than
    retried forever. While the control plane is unreachable the source keeps everything (it is
    bounded itself).
    """

    def __init__(
        self,
        client: ControlPlaneClient,
        source: RecordSource,
        *,
        batch_size: int = 500,
        idle_s: float = 1.0,
        first_backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        dead_letter: Path | None = None,
    ) -> None:
        self.client = client
        self.source = source
        self.dead_letter = dead_letter
        self.batch_size = batch_size
        self.idle_s = idle_s
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self.accepted = 0
        self.duplicates = 0
        self.rejected = 0

    async def ship_once(self) -> int:
        """Send one batch; returns how many records left the source (0 when idle)."""
        batch = self.source.pending(self.batch_size)
        if not batch:
            return 0
        try:
            result = await self.client.post_records(batch)
        except ControlPlaneUnreachable:
            raise
        except ControlPlaneError as exc:
            if exc.status != 400:
                raise
            # Every record of the batch is malformed: it can never be accepted.
            logger.error("control plane rejected a whole batch of %d records: %s", len(batch), exc)
            self.rejected += len(batch)
            self._set_aside([(record, exc.message) for record in batch])
        else:
            self.accepted += result.accepted
            self.duplicates += result.duplicates
            if result.errors:
                logger.error("control plane rejected %d records: %s", len(result.errors),
                             dict(list(result.errors.items())[:3]))  # fmt: skip
                self.rejected += len(result.errors)
                self._set_aside(
                    [(batch[int(i)], error) for i, error in result.errors.items()
                     if str(i).isdigit() and int(i) < len(batch)]
                )  # fmt: skip
        self.source.delivered(len(batch))
        return len(batch)

    def _set_aside(self, rejected: Sequence[tuple[Mapping[str, Any], Any]]) -> None:
        """Append rejected records with their errors to the dead-letter file, for an operator."""
        if self.dead_letter is None or not rejected:
            return
        self.dead_letter.parent.mkdir(parents=True, exist_ok=True)
        with self.dead_letter.open("a", encoding="utf-8") as handle:
            for record, error in rejected:
                handle.write(json.dumps({"record": record, "error": error}, default=str) + "\n")

    async def run(self) -> None:
        """Ship until cancelled, backing off while the control plane is unreachable."""
        delays = backoff_delays(self.first_backoff_s, self.max_backoff_s)
        while True:
            try:
                shipped = await self.ship_once()
            except ControlPlaneUnreachable:
                await asyncio.sleep(next(delays))
                continue
            except ControlPlaneError as exc:
                # Refused (a revoked token, say): an operator must act; keep every record.
                logger.error("control plane refused the records: %s", exc)
                await asyncio.sleep(self.max_backoff_s)
                continue
            delays = backoff_delays(self.first_backoff_s, self.max_backoff_s)
            if shipped == 0:
                await asyncio.sleep(self.idle_s)
