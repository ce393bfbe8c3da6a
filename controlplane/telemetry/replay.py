"""Replay of dead letters after a fix: the pending records go through ingestion again.

Each goes back as the token that reported it did (so the same site and gateway checks apply),
in batches of at most ``services.MAX_BATCH``. Ingestion is idempotent by request id: replaying
twice, or a record that also arrived again meanwhile, bills once. A record accepted now, or
found already stored, is marked replayed; one refused again stays pending with its new errors
(``dead_letters_store`` updates its row). See ``dead_letters`` for the whole design.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils import timezone

from controlplane.telemetry.models import DeadLetter
from controlplane.telemetry.services import MAX_BATCH, records_ingest


@dataclass(frozen=True)
class ReplayResult:
    """What a replay did: records accepted now, found already stored, refused again."""

    accepted: int
    duplicates: int
    refused: int


def _replay_batch(letters: Sequence[DeadLetter]) -> tuple[int, int, int]:
    records = [json.loads(letter.record) for letter in letters]
    result = records_ingest(records=records, source_token=letters[0].source_token)
    done = [letter.pk for i, letter in enumerate(letters) if i not in result.errors]
    DeadLetter.objects.filter(pk__in=done).update(replayed_at=timezone.now())
    return result.accepted, result.duplicates, len(result.errors)


def dead_letters_replay(
    *, site: str | None = None, agent: str | None = None, ids: Sequence[int] | None = None
) -> ReplayResult:
    """Replay the pending dead letters (of ``site``, ``agent`` or the given ``ids`` when
    set), grouped by the token that reported them."""
    pending = DeadLetter.objects.filter(replayed_at__isnull=True).select_related(
        "source_token__site"
    )
    if site is not None:
        pending = pending.filter(site=site)
    if agent is not None:
        pending = pending.filter(agent=agent)
    if ids is not None:
        pending = pending.filter(pk__in=list(ids))
    by_token: dict[int | None, list[DeadLetter]] = {}
    for letter in pending.order_by("id"):
        by_token.setdefault(letter.source_token_id, []).append(letter)
    totals = [0, 0, 0]
    for letters in by_token.values():
        for start in range(0, len(letters), MAX_BATCH):
            counts = _replay_batch(letters[start : start + MAX_BATCH])
            totals = [a + b for a, b in zip(totals, counts, strict=True)]
    return ReplayResult(*totals)
