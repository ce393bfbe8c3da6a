"""Write requests as Mooncake JSON lines, the format every trace tool of the project reads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from pdd_core.workload.request import Request


def mooncake_record(request: Request) -> dict[str, object]:
    """One request as a Mooncake JSON object, with our optional keys after the standard four.

    ``timestamp`` is whole milliseconds, as in the published traces; ``id``, ``session``,
    ``tenant`` and ``turn`` are extensions that Mooncake's own tools ignore and ours read back.
    """
    record: dict[str, object] = {
        "timestamp": round(request.arrival_s * 1000),
        "input_length": request.input_tokens,
        "output_length": request.output_tokens,
        "hash_ids": list(request.block_hashes),
        "id": request.id,
    }
    if request.session is not None:
        record["session"] = request.session
    record["tenant"] = request.tenant
    record["turn"] = request.turn
    return record


def write_mooncake(requests: Iterable[Request], out: TextIO) -> int:
    """Write requests to an open text stream, one JSON object per line; returns the count."""
    count = 0
    for request in requests:
        out.write(json.dumps(mooncake_record(request), separators=(", ", ": ")))
        out.write("\n")
        count += 1
    return count


def write_mooncake_file(requests: Iterable[Request], path: Path | str) -> int:
    """Write requests to ``path`` (created or replaced); returns the count."""
    with Path(path).open("w", encoding="utf-8") as fh:
        return write_mooncake(requests, fh)
