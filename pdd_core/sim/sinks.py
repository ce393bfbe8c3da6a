"""Where the simulator puts each request's record as the request ends.

By default the records go into a list (``Simulator.records``), which a summary then folds; a
day-long run cannot afford that list (a few hundred bytes per request, millions of requests),
so a sink can take them instead: ``pdd_core.sim.stream.StreamingSummary`` folds each record
into running aggregates, ``RecordFile`` writes it to disk as it comes, and ``Tee`` feeds
several sinks. A sink only needs ``append`` and ``len`` (records taken so far), which a list
has too.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Protocol

from pdd_core.sim.records import SimulatedRequest


class RecordSink(Protocol):
    """Takes each record as its request ends; ``len`` is how many it has taken."""

    def append(self, record: SimulatedRequest, /) -> None: ...

    def __len__(self) -> int: ...


class Tee:
    """Every record to each of ``sinks``, in order."""

    def __init__(self, *sinks: RecordSink) -> None:
        self._sinks = sinks
        self._count = 0

    def append(self, record: SimulatedRequest, /) -> None:
        self._count += 1
        for sink in self._sinks:
            sink.append(record)

    def __len__(self) -> int:
        return self._count


class RecordFile:
    """Records written to ``path`` as they come: CSV (the columns of ``records.csv``, one row
    per request) unless the name ends in ``.jsonl`` (one JSON object per line, NaN as null).

    A context manager: the file is flushed and closed on exit, so a run that fails part way
    leaves the records of the requests that ended before it.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._columns = SimulatedRequest.columns()
        self._fh: IO[str] = self.path.open("w", encoding="utf-8", newline="")
        self._jsonl = self.path.suffix == ".jsonl"
        self._csv = None if self._jsonl else csv.writer(self._fh)
        if self._csv is not None:
            self._csv.writerow(self._columns)
        self._count = 0

    def append(self, record: SimulatedRequest, /) -> None:
        self._count += 1
        if self._csv is not None:
            self._csv.writerow(record)
            return
        row: dict[str, Any] = dict(zip(self._columns, record, strict=True))
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                row[key] = None
        self._fh.write(json.dumps(row) + "\n")

    def __len__(self) -> int:
        return self._count

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> RecordFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
