"""The block store between a vLLM instance and its PDD agent: one file per KV block.

vLLM's KV lives in its worker process; the agent that ships it lives in another. They meet
here: a directory (on tmpfs such as ``/dev/shm`` in production) holding one file per block,
named by the block's PDD chain hash (``engine.protocol.block_hashes`` with vLLM's block size).
The connector writes the blocks a prefill computed and reads the blocks a request can reuse; the
agent reads them to send ``KV_BLOCK`` frames and writes the blocks it receives. A file's bytes
are exactly a ``KVBlock``'s ``data``: all layers' keys and values of the block's tokens,
``(layers, 2, tokens, kv_heads x head_dim)`` in the cache's dtype.

Writes are atomic (a temporary file renamed into place), so a reader never sees half a block.
The store is bounded: past ``capacity_bytes`` the least recently written blocks are removed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

SUFFIX = ".kv"


class BlockStore:
    """Blocks by chain hash in one directory, shared by a vLLM instance and its agent."""

    def __init__(self, directory: Path | str, capacity_bytes: int | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.capacity_bytes = capacity_bytes

    def path(self, block_hash: int) -> Path:
        return self.directory / f"{block_hash:016x}{SUFFIX}"

    def has(self, block_hash: int) -> bool:
        return self.path(block_hash).is_file()

    def leading(self, hashes: Sequence[int]) -> int:
        """How many of ``hashes``, from the first, the store holds."""
        count = 0
        for block_hash in hashes:
            if not self.has(block_hash):
                break
            count += 1
        return count

    def read(self, block_hash: int) -> bytes | None:
        """A block's bytes, or None if it is not (or no longer) here."""
        try:
            return self.path(block_hash).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, block_hash: int, data: bytes) -> None:
        """Store a block atomically; an existing block of the same hash is replaced."""
        self.directory.mkdir(parents=True, exist_ok=True)  # it may have been cleaned away
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, self.path(block_hash))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        if self.capacity_bytes is not None:
            self.trim(self.capacity_bytes)

    def trim(self, capacity_bytes: int) -> list[Path]:
        """Remove the least recently written blocks until at most ``capacity_bytes`` remain."""
        entries = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith(SUFFIX):
                stat = entry.stat()
                entries.append((stat.st_mtime_ns, stat.st_size, Path(entry.path)))
        total = sum(size for _, size, _ in entries)
        removed: list[Path] = []
        for _, size, path in sorted(entries):
            if total <= capacity_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            removed.append(path)
        return removed
