"""``pdd wan`` as a real process: it proxies, reports counters on its control port, and refuses
to open a control port without a token."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from pdd_core.agent.supervisor.plane import free_ports
from pdd_core.agent.wan.control import control_request
from pdd_core.agent.wan.probe import start_probe_server, upload


@pytest.fixture
def ports() -> Iterator[tuple[int, int]]:
    first, second = free_ports("127.0.0.1", 2)  # distinct, unlike two separate bind(0) calls
    yield first, second


async def wait_for_port(port: int, timeout_s: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return


async def test_pdd_wan_proxies_and_serves_counters(ports: tuple[int, int]) -> None:
    listen, control = ports
    probe = await start_probe_server()
    upstream = probe.sockets[0].getsockname()[1]
    env = {**os.environ, "PDD_WAN_TOKEN": "tok"}
    process = subprocess.Popen(
        [sys.executable, "-m", "pdd_core", "wan", "--listen", f"127.0.0.1:{listen}",
         "--upstream", f"127.0.0.1:{upstream}", "--bandwidth-gbps", "1", "--rtt-ms", "2",
         "--control", f"127.0.0.1:{control}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        await wait_for_port(control)
        reader, writer = await asyncio.open_connection("127.0.0.1", listen)
        await asyncio.wait_for(upload(reader, writer, 200_000), 10)
        writer.close()

        status, body = await control_request(("127.0.0.1", control), "tok", "GET", "/counters")

        assert status == 200
        assert body["bytes_up"] == 9 + 200_000
        assert body["bytes_down"] == 1
        assert body["settings"] == {
            "bandwidth_gbps": 1.0,
            "rtt_ms": 2.0,
            "jitter_ms": 0.0,
            "initial_window_bytes": 14_600.0,
        }
    finally:
        process.terminate()
        process.wait(10)
        probe.close()


def test_pdd_wan_refuses_a_control_port_without_a_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PDD_WAN_TOKEN"}
    result = subprocess.run(
        [sys.executable, "-m", "pdd_core", "wan", "--listen", "127.0.0.1:0",
         "--upstream", "127.0.0.1:9", "--bandwidth-gbps", "1", "--control", "127.0.0.1:0"],
        env=env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip

    assert result.returncode == 2
    assert "PDD_WAN_TOKEN" in result.stderr
