"""The vLLM engine's settings in the topology file, its server commands, and its block store.

These run without vLLM installed: ``pdd_core`` must import, validate a vLLM topology and build
each role's command on a machine that only runs agents.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pdd_core.agent.config import ConfigError, config_from_dict
from pdd_core.agent.engines import make_engine
from pdd_core.engine.protocol import EngineError, KVBlock, block_hashes
from pdd_core.engine.vllm.config import VLLMConfigError, instance_for, server_command
from pdd_core.engine.vllm.engine import VLLMEngine
from pdd_core.engine.vllm.store import BlockStore

SECTION: dict[str, Any] = {
    "model": "/models/llama-3.1-8b",
    "served_model_name": "llama",
    "dtype": "bfloat16",
    "store_dir": "/dev/shm/pdd-kv",
    "roles": {
        "prefill": {"max_model_len": 32768, "gpu_memory_utilization": 0.9},
        "main": {"max_num_seqs": 128, "tensor_parallel_size": 2},
    },
    "agents": {"p1": {"url": "http://10.0.0.5:8100"}, "md1": {"url": "http://10.1.0.7:8200"}},
}


def plane(section: dict[str, Any]) -> dict[str, Any]:
    agents = [("gw", "gateway", "a"), ("p1", "prefill", "a"), ("rld1", "relay", "a")]
    agents.append(("md1", "main", "b"))
    return {
        "model": "llama",
        "engine": {"kind": "vllm", "block_size": 32, "vllm": section},
        "agents": [{"id": i, "role": r, "site": s} for i, r, s in agents],
    }


def test_settings_merge_section_then_role_then_agent() -> None:
    p1 = instance_for(SECTION, "prefill", "p1", 32)
    assert (p1.url, p1.port, p1.max_model_len, p1.gpu_memory_utilization) == (
        "http://10.0.0.5:8100",
        8100,
        32768,
        0.9,
    )
    assert (p1.kv_role, p1.tensor_parallel_size, p1.block_size) == ("kv_both", 1, 32)
    md1 = instance_for(SECTION, "main", "md1", 32)
    assert (md1.max_num_seqs, md1.tensor_parallel_size, md1.max_model_len) == (128, 2, None)
    assert instance_for(SECTION, "relay", "rld1", 32).kv_role == "kv_consumer"


def test_server_command_starts_vllm_with_the_pdd_connector() -> None:
    argv, env = server_command(instance_for(SECTION, "prefill", "p1", 32), "python3")
    assert argv[:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert flags["--model"] == "/models/llama-3.1-8b"
    assert (flags["--host"], flags["--port"], flags["--block-size"]) == ("10.0.0.5", "8100", "32")
    assert flags["--gpu-memory-utilization"] == "0.9"
    assert json.loads(flags["--kv-transfer-config"]) == {
        "kv_connector": "PddBlockConnector",
        "kv_connector_module_path": "pdd_core.engine.vllm.connector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"store_dir": "/dev/shm/pdd-kv/p1"},
        "kv_load_failure_policy": "recompute",
    }
    assert env == {}


def test_a_vllm_topology_parses_and_each_agent_gets_its_instance() -> None:
    config = config_from_dict(plane(SECTION))
    engine = make_engine(config, "main", "md1")
    assert isinstance(engine, VLLMEngine)
    assert (engine.host, engine.port, engine.model, engine.block_size) == (
        "10.1.0.7",
        8200,
        "llama",
        32,
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model": ""}, "engine.vllm.model: a model path or name"),
        ({"roles": {"main": {"max_num_sequences": 8}}}, "engine.vllm.roles.main.max_num_sequences"),
        ({"agents": {"md1": {"kv_role": "both"}}}, "engine.vllm.kv_role"),
        ({"block_size": 16}, "engine.vllm.block_size: must equal engine.block_size"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization: in \\(0, 1\\]"),
    ],
)
def test_malformed_vllm_settings_fail_at_start_naming_the_field(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(plane({**SECTION, **change}))
    with pytest.raises(VLLMConfigError, match=message):
        instance_for({**SECTION, **change}, "main", "md1", 32)


def test_pdd_core_imports_without_vllm_or_torch() -> None:
    code = (
        "import sys; import pdd_core.engine.vllm.engine, pdd_core.engine.vllm.config, "
        "pdd_core.agent.engines, pdd_core.agent.runtime; "
        "print(sorted({'vllm', 'torch'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_adapter_import_and_export_round_trip_through_the_store(tmp_path: Path) -> None:
    engine = VLLMEngine(
        "http://127.0.0.1:1", "tiny", BlockStore(tmp_path), block_size=4, vocab_size=258
    )
    tokens = list(range(10))
    hashes = block_hashes(tokens, 4, partial=True)
    blocks = [
        KVBlock(i, h, tuple(tokens[i * 4 : i * 4 + 4]), bytes([i]) * 8 * len(tokens[i * 4 :][:4]))
        for i, h in enumerate(hashes)
    ]
    kv = engine.import_blocks(blocks)
    assert kv.tokens == tokens
    assert engine.export_blocks(kv) == blocks
    assert engine.export_blocks(kv, start_block=2) == blocks[2:]
    bad = [blocks[0], KVBlock(1, hashes[2], blocks[1].tokens, blocks[1].data)]
    with pytest.raises(EngineError, match="block 1: hash does not match"):
        engine.import_blocks(bad)
    with pytest.raises(EngineError, match="block 0: not in the store"):
        engine.export_blocks(type(kv)([7, 7, 7, 7], 4))


def test_store_trims_the_oldest_blocks_past_its_capacity(tmp_path: Path) -> None:
    store = BlockStore(tmp_path, capacity_bytes=250)
    for block_hash in (1, 2, 3):
        store.write(block_hash, bytes(100))
    assert [store.has(h) for h in (1, 2, 3)] == [False, True, True]
    assert store.leading([2, 3, 1]) == 2
    assert store.read(1) is None


def test_pdd_vllm_prints_one_agents_server_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pdd_core.cli import main

    path = tmp_path / "plane.json"
    path.write_text(json.dumps(plane(SECTION)))
    assert main(["vllm", "--config", str(path), "--id", "md1", "--print", "--python", "py"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("py -m vllm.entrypoints.openai.api_server --model /models/llama-3.1-8b")
    assert "--port 8200 --tensor-parallel-size 2 --block-size 32" in line
    assert '"store_dir":"/dev/shm/pdd-kv/md1"' in line
    assert main(["vllm", "--config", str(path), "--id", "gw", "--print"]) == 2


def test_adapter_refuses_ids_outside_the_vocabulary_before_calling_vllm(tmp_path: Path) -> None:
    engine = VLLMEngine(
        "http://127.0.0.1:1", "tiny", BlockStore(tmp_path), block_size=4, vocab_size=258
    )
    with pytest.raises(EngineError, match=r"tokens: ids must be in \[0, 258\)"):
        engine.prefill([1, 2, 258])
