"""A probe server and client that time a transfer across a line, emulated or real.

The emulator's promise is that a transfer takes what ``transfer.transfer_time`` says. Checking
that needs a peer that receives ``n`` bytes and acknowledges them (an upload: ``n / B + RTT``)
or sends ``n`` bytes on request (a download: the request's one-way trip, then ``n / B`` plus the
data's one-way trip, again ``n / B + RTT``). The tests, the benches and an operator validating
a line all use this one pair.

Request: one byte ``U`` or ``D`` and the size as a big-endian u64. An upload is followed by
the bytes and answered by one byte ``K``; a download is answered by the bytes.
"""

from __future__ import annotations

import asyncio
import struct
import time

REQUEST = struct.Struct("!cQ")
ACK = b"K"
_BLOCK = 1024 * 1024
_ZEROS = memoryview(bytes(_BLOCK))


async def _serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                op, size = REQUEST.unpack(await reader.readexactly(REQUEST.size))
            except asyncio.IncompleteReadError:
                return
            if op == b"U":
                left = size
                while left:
                    chunk = await reader.read(min(left, _BLOCK))
                    if not chunk:
                        return
                    left -= len(chunk)
                writer.write(ACK)
            elif op == b"D":
                left = size
                while left:
                    writer.write(_ZEROS[: min(left, _BLOCK)])
                    left -= min(left, _BLOCK)
                    await writer.drain()
            else:
                return
            await writer.drain()
    except ConnectionError:
        return
    finally:
        writer.close()


async def start_probe_server(host: str = "127.0.0.1", port: int = 0) -> asyncio.Server:
    """Serve probe requests on ``host:port`` (port 0 picks a free one) until closed."""
    return await asyncio.start_server(_serve_one, host, port, limit=_BLOCK)


async def upload(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, nbytes: int) -> float:
    """Send ``nbytes`` on an open probe connection; seconds until the acknowledgement arrives."""
    started = time.perf_counter()
    writer.write(REQUEST.pack(b"U", nbytes))
    left = nbytes
    while left:
        writer.write(_ZEROS[: min(left, _BLOCK)])
        left -= min(left, _BLOCK)
        await writer.drain()
    if await reader.readexactly(1) != ACK:
        raise ConnectionError("probe: unexpected acknowledgement")
    return time.perf_counter() - started


async def download(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, nbytes: int
) -> float:
    """Ask for ``nbytes`` on an open probe connection; seconds until the last one arrives."""
    started = time.perf_counter()
    writer.write(REQUEST.pack(b"D", nbytes))
    await writer.drain()
    left = nbytes
    while left:
        chunk = await reader.read(min(left, _BLOCK))
        if not chunk:
            raise ConnectionError("probe: connection closed during a download")
        left -= len(chunk)
    return time.perf_counter() - started
