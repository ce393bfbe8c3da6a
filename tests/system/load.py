"""A small load generator for the system tests: closed-loop streaming clients on a gateway."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from pdd_core.agent.replay import Result, stream_completion
from pdd_core.agent.supervisor.plane import DataPlane

PIPELINES = ("P-RLD-MD", "P-MD", "P-RLD")


@dataclass(slots=True)
class Sent:
    started: float
    pipeline: str
    result: Result


def run_load(
    plane: DataPlane,
    *,
    clients: int,
    duration_s: float,
    events: dict[float, Callable[[], None]],
    prompt_tokens: int = 600,
    max_tokens: int = 48,
) -> list[Sent]:
    """``clients`` streams back to back for ``duration_s``, forcing the pipelines in turn;
    each ``events`` action runs (in a thread) at its offset in seconds."""

    async def main() -> list[Sent]:
        sent: list[Sent] = []
        start = time.monotonic()
        counter = iter(range(1_000_000))

        async def client(number: int) -> None:
            while time.monotonic() - start < duration_s:
                n = next(counter)
                pipeline = PIPELINES[n % len(PIPELINES)]
                prompt = [2 + (n * 7919 + i) % 4000 for i in range(prompt_tokens)]
                body = {
                    "prompt": prompt, "max_tokens": max_tokens, "stream": True,
                    "stream_options": {"include_usage": True}, "return_token_ids": True,
                    "pdd": {"pipeline": pipeline},
                }  # fmt: skip
                began = time.monotonic() - start
                result = await stream_completion(plane.gateway_url, plane.api_key, body, 60)
                sent.append(Sent(began, pipeline, result))

        async def fire(at: float, action: Callable[[], None]) -> None:
            await asyncio.sleep(at)
            await asyncio.to_thread(action)

        await asyncio.gather(
            *(client(i) for i in range(clients)), *(fire(t, a) for t, a in events.items())
        )
        return sent

    return asyncio.run(main())
