"""The one request record every trace reader, generator, simulator and router shares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pdd_core.errors import PddError


@dataclass(frozen=True, slots=True)
class Request:
    """One LLM request of a workload, whatever trace or generator it came from.

    ``block_hashes`` holds one id per block of the input (512 tokens in Mooncake traces, 16 in
    Qwen-Bailian ones); equal ids on equal paths mean equal prefix content, which is all a prefix
    cache needs. It is empty for traces without prefix information (Azure), meaning no reuse.
    ``session`` and ``turn`` tie the turns of a conversation or agent run together when the
    trace knows them; ``tenant`` is who is billed.
    """

    id: str
    arrival_s: float
    input_tokens: int
    output_tokens: int
    block_hashes: tuple[int, ...] = ()
    session: str | None = None
    tenant: str = "default"
    turn: int = 1


@dataclass(frozen=True, slots=True)
class Trace:
    """Requests read from one file, plus what reading them took.

    ``block_size`` is the number of tokens per hash of the format (None when it has no
    hashes); ``skipped`` counts malformed lines dropped under ``skip_invalid``.
    """

    path: Path
    format: str
    requests: tuple[Request, ...]
    block_size: int | None
    skipped: int = 0


class TraceFormatError(PddError, ValueError):
    """A trace line that cannot be read, located by path, line number and field.

    A ``ValueError`` so that command-line verbs report it as a usage error, not a crash.
    """

    def __init__(self, path: Path | str, line: int, field: str, reason: str) -> None:
        self.path = Path(path)
        self.line = line
        self.field = field
        self.reason = reason
        super().__init__(f"{self.path}:{line}: {field}: {reason}")
