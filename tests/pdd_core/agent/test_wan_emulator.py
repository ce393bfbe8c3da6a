"""The WAN emulator over real sockets on 127.0.0.1: physics-accurate timing, fair sharing,
cuts that fail fast, counters, and the authenticated control endpoint.

Timing assertions are the emulator's contract (the issue's "within 10% for 1 MB and more"),
checked against ``transfer.transfer_time`` for the configured line. Each figure is the best of
a few transfers on a warmed-up connection: the physics assumes a long-lived connection, and a
loaded test machine (other processes taking the CPU) can only make a transfer slower, never
faster, so the minimum is the emulator's own accuracy. The lower bound keeps that honest: no
transfer may beat the physics.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pdd_core.agent.runtime import reset
from pdd_core.agent.wan.control import ControlServer, control_request
from pdd_core.agent.wan.emulator import LineSettings, WanEmulator
from pdd_core.agent.wan.probe import REQUEST, download, start_probe_server, upload
from pdd_core.transfer import IW10_BYTES, TCP_RTO_MIN_S, transfer_time

MB = 1024 * 1024
TOLERANCE = 0.10
LIMIT = 1 << 20


@pytest.fixture
async def probe_port() -> AsyncIterator[int]:
    server = await start_probe_server()
    yield server.sockets[0].getsockname()[1]
    server.close()


async def emulator(port: int, settings: LineSettings) -> WanEmulator:
    emu = WanEmulator(listen=("127.0.0.1", 0), upstream=("127.0.0.1", port), settings=settings)
    await emu.start()
    return emu


async def connect(emu: WanEmulator) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(*emu.address, limit=LIMIT)
    await asyncio.wait_for(upload(reader, writer, 1), 5)  # warm the connection up
    return reader, writer


# A Python proxy adds a few ms of event-loop scheduling per transfer when the machine is busy
# (CI shares two cores); the sizes and rates keep each transfer long enough (>= ~100 ms) that
# the 10% bound tests the shaping, not the scheduler. bench/bench_wan_emulator.py covers up to
# 2 Gbps.
@pytest.mark.parametrize(("megabytes", "gbps"), [(1, 0.05), (4, 0.2), (8, 0.5), (16, 0.5)])
async def test_transfer_time_matches_the_physics_within_ten_percent(
    probe_port: int, megabytes: int, gbps: float
) -> None:
    settings = LineSettings(bandwidth_gbps=gbps, rtt_ms=10.0)
    emu = await emulator(probe_port, settings)
    reader, writer = await connect(emu)
    expected = transfer_time(settings.link_spec(), megabytes * MB)

    ups = [await asyncio.wait_for(upload(reader, writer, megabytes * MB), 30) for _ in range(4)]
    downs = [await asyncio.wait_for(download(reader, writer, megabytes * MB), 30) for _ in range(4)]

    assert min(ups + downs) >= expected * 0.99, (ups, downs, expected)
    for measured in (min(ups), min(downs)):
        assert measured <= expected * (1 + TOLERANCE), (ups, downs, expected)
    writer.close()
    await emu.close()


async def test_a_connection_idle_past_its_timeout_pays_slow_start_as_the_physics_does(
    probe_port: int,
) -> None:
    # 8 MB at 0.5 Gbps over 20 ms: the window doubles from 14,600 B for 6 rounds before it
    # covers the 1.25 MB bandwidth-delay product, about 110 ms more than a warm line's 154 ms.
    settings = LineSettings(bandwidth_gbps=0.5, rtt_ms=20.0, initial_window_bytes=IW10_BYTES)
    emu = await emulator(probe_port, settings)
    reader, writer = await connect(emu)
    link, size = settings.link_spec(), 8 * MB
    cold = transfer_time(link, size, initial_window_bytes=IW10_BYTES)
    warm = transfer_time(link, size)
    assert cold > warm + 0.1

    after_idle = []
    for _ in range(3):
        await asyncio.sleep(TCP_RTO_MIN_S * 1.5)
        after_idle.append(await asyncio.wait_for(upload(reader, writer, size), 30))
    # Back to back (within the timeout of the last delivery): the window stays open.
    back_to_back = [await asyncio.wait_for(upload(reader, writer, size), 30) for _ in range(3)]

    assert min(after_idle) >= cold * 0.99, (after_idle, cold)
    assert min(after_idle) <= cold * (1 + TOLERANCE), (after_idle, cold)
    assert warm * 0.99 <= min(back_to_back) <= warm * (1 + TOLERANCE), (back_to_back, warm)
    writer.close()
    await emu.close()


async def test_two_concurrent_flows_each_get_half_the_line(probe_port: int) -> None:
    settings = LineSettings(bandwidth_gbps=0.2, rtt_ms=10.0)
    emu = await emulator(probe_port, settings)
    flows = [await connect(emu) for _ in range(2)]
    expected = transfer_time(settings.link_spec(), 4 * MB, flows=2)

    times = await asyncio.wait_for(asyncio.gather(*(upload(r, w, 4 * MB) for r, w in flows)), 30)

    for measured in times:
        assert expected * 0.99 <= measured <= expected * (1 + TOLERANCE), (times, expected)
    # Alone, the same transfer takes about half as long: the line was really shared.
    alone = transfer_time(settings.link_spec(), 4 * MB)
    assert min(times) > 1.7 * alone
    for _, writer in flows:
        writer.close()
    await emu.close()


async def test_counters_count_the_bytes_of_each_flow(probe_port: int) -> None:
    emu = await emulator(probe_port, LineSettings(bandwidth_gbps=1.0, rtt_ms=0.0))
    reader, writer = await connect(emu)  # 9 + 1 bytes up, 1 byte of ack down

    await asyncio.wait_for(upload(reader, writer, 100_000), 10)
    await asyncio.wait_for(download(reader, writer, 50_000), 10)

    counters = emu.counters()
    assert counters["bytes_up"] == 9 + 1 + 9 + 100_000 + 9
    assert counters["bytes_down"] == 1 + 1 + 50_000
    assert counters["connections"] == 1
    assert counters["active"] == 1
    flows = counters["flows"]
    assert isinstance(flows, list) and flows[0]["bytes_up"] == counters["bytes_up"]
    writer.close()
    await emu.close()


async def test_a_reset_cut_gives_the_client_an_error_not_a_hang(probe_port: int) -> None:
    emu = await emulator(probe_port, LineSettings(bandwidth_gbps=0.1, rtt_ms=10.0))
    reader, writer = await connect(emu)
    transfer = asyncio.create_task(upload(reader, writer, 16 * MB))  # about 1.3 s at 0.1 Gbps
    await asyncio.sleep(0.2)

    emu.cut("reset")

    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(transfer, 5)
    # New connections are refused while the line is cut...
    r2, w2 = await asyncio.open_connection(*emu.address)
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(upload(r2, w2, 1000), 5)
    # ...and accepted again once it is restored.
    emu.restore()
    reader, writer = await connect(emu)
    assert await asyncio.wait_for(upload(reader, writer, 1000), 5) > 0
    writer.close()
    await emu.close()


async def test_a_sender_that_resets_its_connection_frees_the_line_at_once(
    probe_port: int,
) -> None:
    """A reset discards what the sender had not yet put on the line (a real sender's socket
    buffer goes with it): the bytes the emulator holds for that connection stop competing for
    the line, as a cancelled flow leaves the simulator's. P resets a transfer's connection when
    MD released the request (the relay finished it); without this its queued megabytes kept
    half the line from the transfers behind them. (A sender that has filled the emulator's
    window is noticed only once the emulator reads from it again: a chunk or so later.)"""
    settings = LineSettings(bandwidth_gbps=0.2, rtt_ms=10.0)
    emu = await emulator(probe_port, settings)
    reader, writer = await connect(emu)
    alone = transfer_time(settings.link_spec(), 4 * MB)
    dead_bytes = 3 * MB + MB // 2  # within the emulator's window: it has read all of them

    times = []
    for _ in range(3):  # the best of three (module docstring: load only slows a transfer)
        _, dead = await connect(emu)
        dead.write(REQUEST.pack(b"U", 2 * dead_bytes) + bytes(dead_bytes))  # never acknowledged
        await asyncio.sleep(0.02)
        transfer = asyncio.create_task(upload(reader, writer, 4 * MB))
        await asyncio.sleep(0.02)
        reset(dead)
        times.append(await asyncio.wait_for(transfer, 30))

    # Sharing the line with the dead flow's 3.5 MB would take about 1.7 times as long.
    assert alone * 0.99 <= min(times) <= alone * 1.3, (times, alone)
    flows = emu.counters()["flows"]
    assert isinstance(flows, list) and len(flows) == 4  # the upload's and three reset ones
    assert all(f["bytes_up"] < dead_bytes for f in flows if f["flow"] != 1), flows
    writer.close()
    await emu.close()


async def test_the_receiver_of_a_reset_flow_reads_a_reset_not_a_cut_stream() -> None:
    """Across a real line the sender's reset reaches the receiver: it reads
    ``ConnectionResetError`` (which the agents end quietly), not a stream cut inside a frame
    (which they log as a protocol error)."""
    seen: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def receive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.read(1 << 20):
                pass
            seen.set_result("end of stream")
        except ConnectionResetError:
            seen.set_result("reset")
        finally:
            writer.close()

    server = await asyncio.start_server(receive, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    emu = await emulator(port, LineSettings(bandwidth_gbps=0.2, rtt_ms=10.0))
    _, writer = await asyncio.open_connection(*emu.address)
    writer.write(bytes(MB))
    await asyncio.sleep(0.05)  # part of it crossed, the rest waits for the line

    reset(writer)

    assert await asyncio.wait_for(seen, 5) == "reset"
    await emu.close()
    server.close()


async def test_a_blackhole_cut_drops_bytes_and_the_client_times_out(probe_port: int) -> None:
    emu = await emulator(probe_port, LineSettings(bandwidth_gbps=1.0, rtt_ms=2.0))
    reader, writer = await connect(emu)

    emu.cut("blackhole")

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(upload(reader, writer, 10_000), 0.5)
    assert emu.counters()["dropped"] >= 10_000
    writer.close()
    await emu.close()


async def test_degrading_the_line_slows_the_next_transfer(probe_port: int) -> None:
    fast = LineSettings(bandwidth_gbps=0.5, rtt_ms=2.0)
    emu = await emulator(probe_port, fast)
    reader, writer = await connect(emu)

    emu.degrade(bandwidth_gbps=0.1, rtt_ms=20.0)
    measured = await asyncio.wait_for(upload(reader, writer, 2 * MB), 10)

    slow = LineSettings(bandwidth_gbps=0.1, rtt_ms=20.0)
    expected = transfer_time(slow.link_spec(), 2 * MB)
    before = transfer_time(fast.link_spec(), 2 * MB)
    # One measurement, so only the direction is checked tightly (never faster than the degraded
    # physics, far slower than the old line); accuracy has its own best-of-four test above.
    assert expected * 0.99 <= measured <= expected * 1.5
    assert measured > 3 * before
    writer.close()
    await emu.close()


async def test_control_endpoint_requires_the_token_and_drives_the_emulator(
    probe_port: int,
) -> None:
    emu = await emulator(probe_port, LineSettings(bandwidth_gbps=1.0, rtt_ms=4.0))
    control = ControlServer(emu, token="s3cret", host="127.0.0.1", port=0)
    await control.start()
    address = control.address

    status, body = await control_request(address, "wrong", "POST", "/cut", {"mode": "reset"})
    assert (status, emu.cut_mode) == (401, None)  # denied, and nothing was cut

    assert (await control_request(address, "s3cret", "GET", "/counters"))[0] == 200
    status, body = await control_request(
        address, "s3cret", "POST", "/degrade", {"bandwidth_gbps": 0.25, "rtt_ms": 30}
    )
    assert status == 200
    assert body["settings"] == {
        "bandwidth_gbps": 0.25,
        "rtt_ms": 30.0,
        "jitter_ms": 0.0,
        "initial_window_bytes": 0.0,
    }
    assert emu.settings == LineSettings(0.25, 30.0, 0.0)
    status, _ = await control_request(address, "s3cret", "POST", "/degrade", {"rtt_ms": "x"})
    assert status == 400
    status, _ = await control_request(address, "s3cret", "POST", "/degrade", {"bandwidth_gbps": 0})
    assert status == 400
    assert (await control_request(address, "s3cret", "POST", "/cut", {"mode": "x"}))[0] == 400
    assert (await control_request(address, "s3cret", "POST", "/cut", {"mode": "blackhole"}))[
        0
    ] == 200
    assert emu.cut_mode == "blackhole"
    assert (await control_request(address, "s3cret", "POST", "/restore"))[0] == 200
    assert emu.cut_mode is None
    assert (await control_request(address, "s3cret", "GET", "/nope"))[0] == 404

    await control.close()
    await emu.close()


def test_control_server_refuses_to_run_without_a_token() -> None:
    with pytest.raises(ValueError, match="token"):
        ControlServer(None, token="", host="127.0.0.1", port=0)  # type: ignore[arg-type]


def test_line_settings_validate() -> None:
    with pytest.raises(ValueError, match="bandwidth_gbps"):
        LineSettings(bandwidth_gbps=0, rtt_ms=1)
    with pytest.raises(ValueError, match="rtt_ms"):
        LineSettings(bandwidth_gbps=1, rtt_ms=-1)
