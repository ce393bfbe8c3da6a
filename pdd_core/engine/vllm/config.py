"""The topology file's vLLM settings, per role and per agent, and each instance's command.

``engine.kind = "vllm"`` puts every P, RLD and MD agent in front of its own vLLM instance. The
``engine.vllm`` section says how each one runs; ``roles`` sets defaults per role (P prefills
long prompts and wants memory for them; RLD and MD hold decode batches) and ``agents``
overrides one agent (its URL). Each agent's block store is ``store_dir/<agent id>`` unless
the agent sets its own ``store_dir``::

    "engine": {"kind": "vllm", "block_size": 32, "vllm": {
        "model": "/models/Llama-3.1-8B-Instruct", "served_model_name": "llama",
        "tensor_parallel_size": 1, "dtype": "bfloat16", "store_dir": "/dev/shm/pdd-kv",
        "roles": {"prefill": {"max_model_len": 32768, "gpu_memory_utilization": 0.9},
                  "main": {"max_num_seqs": 128}},
        "agents": {"p1": {"url": "http://10.0.0.5:8100"}, "md1": {"url": "..."}}}}

The control plane's pools map onto this one to one: a pool of a role is its agents, each with
the instance this file describes. ``server_command`` turns an agent's settings into the
``python -m vllm.entrypoints.openai.api_server`` line and environment that start its instance
with the PDD connector; P's instance is a KV producer, RLD's and MD's are consumers (``kv_both``
where an instance also reuses its own saved prefix, as P does for its prefix cache).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pdd_core.errors import PddError

CONNECTOR = "PddBlockConnector"
CONNECTOR_MODULE = "pdd_core.engine.vllm.connector"
KV_ROLES = {"prefill": "kv_both", "relay": "kv_consumer", "main": "kv_both"}


class VLLMConfigError(PddError, ValueError):
    """The ``engine.vllm`` section is malformed; the message names the field."""


@dataclass(frozen=True, slots=True)
class VLLMInstance:
    """How one agent's vLLM instance runs (``None`` leaves vLLM's own default)."""

    model: str
    url: str = "http://127.0.0.1:8000"
    served_model_name: str = ""
    tensor_parallel_size: int = 1
    block_size: int = 16
    dtype: str = "auto"
    store_dir: str = "/dev/shm/pdd-kv"
    store_capacity_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    cpu_kvcache_space_gib: float | None = None  # vLLM on CPU: VLLM_CPU_KVCACHE_SPACE
    cpu_threads_bind: str | None = None  # vLLM on CPU: VLLM_CPU_OMP_THREADS_BIND
    enforce_eager: bool = False
    skip_tokenizer_init: bool = False
    kv_role: str = "kv_both"
    timeout_s: float = 60.0
    decode_chunk: int = 64
    vocab_size: int = 0  # the model's; when set, out-of-range ids are refused before vLLM

    def __post_init__(self) -> None:
        if not self.model:
            raise VLLMConfigError("engine.vllm.model: a model path or name")
        if self.tensor_parallel_size < 1 or self.block_size < 1 or self.decode_chunk < 1:
            raise VLLMConfigError("engine.vllm: sizes must be positive")
        if self.kv_role not in ("kv_producer", "kv_consumer", "kv_both"):
            raise VLLMConfigError("engine.vllm.kv_role: kv_producer, kv_consumer or kv_both")
        frac = self.gpu_memory_utilization
        if frac is not None and not 0 < frac <= 1:
            raise VLLMConfigError("engine.vllm.gpu_memory_utilization: in (0, 1]")
        if not self.url.startswith("http://"):
            raise VLLMConfigError(f"engine.vllm.url: an http:// address, got {self.url!r}")

    @property
    def name(self) -> str:
        return self.served_model_name or self.model

    @property
    def port(self) -> int:
        tail = self.url.rstrip("/").rsplit(":", 1)[-1]
        return int(tail) if tail.isdigit() else 80


def instance_for(
    section: Mapping[str, Any], role: str, agent_id: str, block_size: int
) -> VLLMInstance:
    """The settings of ``agent_id``'s instance: section defaults, then its role's, then its own."""
    if not isinstance(section, Mapping):
        raise VLLMConfigError("engine.vllm: must be an object")
    known = {f.name for f in fields(VLLMInstance)}
    merged: dict[str, Any] = {"block_size": block_size, "kv_role": KV_ROLES.get(role, "kv_both")}
    for where, layer in (
        ("engine.vllm", section),
        (f"engine.vllm.roles.{role}", section.get("roles", {}).get(role, {})),
        (f"engine.vllm.agents.{agent_id}", section.get("agents", {}).get(agent_id, {})),
    ):
        if not isinstance(layer, Mapping):
            raise VLLMConfigError(f"{where}: must be an object")
        for key, value in layer.items():
            if key in ("roles", "agents"):
                continue
            if key not in known:
                raise VLLMConfigError(f"{where}.{key}: unknown setting")
            merged[key] = value
    # One store per agent, so two agents on one host never read each other's blocks: the KV
    # must cross the PDD transport. An agent's own store_dir is taken as it is (agents that
    # share one instance must share its store).
    own = section.get("agents", {}).get(agent_id, {})
    if "store_dir" not in own:
        merged["store_dir"] = str(Path(merged.get("store_dir", "/dev/shm/pdd-kv")) / agent_id)
    if merged["block_size"] != block_size:
        raise VLLMConfigError("engine.vllm.block_size: must equal engine.block_size")
    try:
        return VLLMInstance(**merged)
    except TypeError as exc:
        raise VLLMConfigError(f"engine.vllm: {exc}") from None


def transfer_config(spec: VLLMInstance) -> dict[str, Any]:
    """vLLM's ``--kv-transfer-config`` for the PDD connector."""
    extra: dict[str, Any] = {"store_dir": spec.store_dir}
    if spec.store_capacity_bytes is not None:
        extra["store_capacity_bytes"] = spec.store_capacity_bytes
    return {
        "kv_connector": CONNECTOR,
        "kv_connector_module_path": CONNECTOR_MODULE,
        "kv_role": spec.kv_role,
        "kv_connector_extra_config": extra,
        "kv_load_failure_policy": "recompute",
    }


def server_command(spec: VLLMInstance, python: str = "python") -> tuple[list[str], dict[str, str]]:
    """The command line and extra environment that start ``spec``'s vLLM instance."""
    host = spec.url.split("://", 1)[1].rsplit(":", 1)[0].strip("/")
    argv = [
        python, "-m", "vllm.entrypoints.openai.api_server",
        "--model", spec.model,
        "--served-model-name", spec.name,
        "--host", host,
        "--port", str(spec.port),
        "--tensor-parallel-size", str(spec.tensor_parallel_size),
        "--block-size", str(spec.block_size),
        "--dtype", spec.dtype,
        "--kv-transfer-config", json.dumps(transfer_config(spec), separators=(",", ":")),
    ]  # fmt: skip
    for flag, value in (
        ("--gpu-memory-utilization", spec.gpu_memory_utilization),
        ("--max-model-len", spec.max_model_len),
        ("--max-num-seqs", spec.max_num_seqs),
    ):
        if value is not None:
            argv += [flag, str(value)]
    if spec.enforce_eager:
        argv.append("--enforce-eager")
    if spec.skip_tokenizer_init:
        argv.append("--skip-tokenizer-init")
    env: dict[str, str] = {}
    if spec.cpu_kvcache_space_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = f"{spec.cpu_kvcache_space_gib:g}"
    if spec.cpu_threads_bind is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = spec.cpu_threads_bind
    return argv, env
