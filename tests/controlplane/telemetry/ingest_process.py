"""A separate ingesting process for the cross-process rollup tests (``test_staging``).

``python -m tests.controlplane.telemetry.ingest_process PREFIXES BATCHES SIZE [--crash-in-flush]``
ingests, for each of the comma-separated ``PREFIXES`` in turn, ``BATCHES`` batches of ``SIZE``
records (``records_of``) into the database of
``DATABASE_URL``, through the real ingestion service and its flush, then prints how many records
were accepted. With ``--crash-in-flush`` the process dies (``os._exit``) inside its first flush
transaction, after the rollup rows were updated and before the commit: a crash between
accumulating and flushing. ``--check`` instead flushes what is staged and prints, as JSON,
how many records are stored, how many were still staged, and the rollup rows that differ from
the rollup of the stored records computed from scratch (``mismatches``: none when exact).
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

T0 = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
CRASH_EXIT = 17


def records_of(prefix: str, batch: int, size: int) -> list[dict[str, Any]]:
    """Deterministic records: a request id says everything about its record, so two processes
    reporting the same id report the same record (a duplicate, not a conflict)."""
    from tests.factories import key_prefix_for

    out = []
    for i in range(size):
        n = batch * size + i
        finish = T0 + timedelta(seconds=(n * 7) % 120, milliseconds=n % 1000)
        hit = (n * 37) % 1000
        tenant = ("acme", "globex")[n % 2]
        out.append({
            "request_id": f"{prefix}-{n}", "tenant": tenant, "model": "m",
            "api_key_prefix": key_prefix_for(tenant),
            "site": ("dc-a", "dc-b")[(n // 2) % 2], "pipeline": ("P-MD", "P-RLD-MD")[n % 3 % 2],
            "arrival_time": (finish - timedelta(seconds=5)).isoformat(),
            "finish_time": finish.isoformat(), "input_tokens": 1000, "hit_tokens": hit,
            "miss_tokens": 1000 - hit, "output_tokens": 100 + n % 50,
            "ttft_s": 0.05 + (n % 40) / 100, "tpot_s": 0.02 + (n % 7) / 1000,
            "wan_bytes": 1000 * n, "handoff_mode": "one-shot", "rld_tokens": n % 13,
            "md_tokens": 50, "sla_met": n % 5 != 0, "rejected": n % 17 == 0,
        })  # fmt: skip
    return out


def rollup_mismatches() -> list[str]:
    """The rollup rows (``window/scope/key/start``) that differ from the rollup of the stored
    records computed from scratch (no price book in these tests: revenue 0)."""
    import math

    from controlplane.telemetry.models import RequestRecord, TelemetryRollup
    from controlplane.telemetry.rollups import accumulate, delta_of

    stored = RequestRecord.objects.values(*STORED)
    want = accumulate(stored, lambda record: 0.0)
    got = {
        (r.window_s, r.scope, r.key, r.start): delta_of(r) for r in TelemetryRollup.objects.all()
    }
    wrong = [f"{k[0]}/{k[1]}/{k[2]}/{k[3].isoformat()}" for k in sorted(set(want) ^ set(got))]
    for key in sorted(set(want) & set(got)):
        a, b = got[key], want[key]
        sums = all(math.isclose(a.sums[n], b.sums[n], rel_tol=1e-12, abs_tol=1e-12)
                   for n in b.sums)  # fmt: skip
        if a.counts != b.counts or a.maps != b.maps or not sums:
            wrong.append(f"{key[0]}/{key[1]}/{key[2]}/{key[3].isoformat()}")
    return wrong


STORED = ("site", "pipeline", "tenant", "model", "finish_time", "input_tokens", "hit_tokens",
          "output_tokens", "ttft_s", "tpot_s", "wan_bytes", "rld_tokens", "md_tokens",
          "handoff_mode", "sla_met", "rejected", "miss_tokens")  # fmt: skip


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from controlplane.telemetry import staging
    from controlplane.telemetry.services import records_ingest

    if argv == ["--check"]:
        from controlplane.telemetry.models import RequestRecord

        left = staging.rollups_flush(wait=True)
        print(json.dumps({"records": RequestRecord.objects.count(), "left": left,
                          "mismatches": rollup_mismatches()}))  # fmt: skip
        return

    prefixes, batches, size = argv[0].split(","), int(argv[1]), int(argv[2])
    if "--crash-in-flush" in argv:
        apply = staging.rollups_apply

        def apply_then_die(deltas: Any) -> Any:
            apply(deltas)
            sys.stdout.flush()
            os._exit(CRASH_EXIT)

        staging.rollups_apply = apply_then_die  # type: ignore[assignment]
    accepted = 0
    for batch in range(batches):
        for prefix in prefixes:
            accepted += records_ingest(records=records_of(prefix, batch, size)).accepted
    print(accepted)


if __name__ == "__main__":
    main(sys.argv[1:])
