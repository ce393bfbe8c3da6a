"""Export a ``TinyTransformer`` as a Hugging Face Llama checkpoint that vLLM can serve.

No weights can be downloaded on the machines that test this project, so the vLLM tier serves a
model made here: the numpy engine's own weights written as ``config.json`` plus
``model.safetensors`` in the Llama layout. The two models are the same function: RMSNorm,
half-split rotary embeddings (Hugging Face's ``rotate_half``), grouped-query attention and a
SwiGLU MLP; only the matrices are transposed (``x @ W`` in numpy, ``W x`` in a ``Linear``).
vLLM's CPU attention needs ``head_dim >= 32`` (``VLLM_TINY`` below).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pdd_core.engine.tiny import TinyConfig, TinyTransformer
from pdd_core.engine.tokenizer import BOS, EOS

# The smallest TinyTransformer vLLM's CPU backend runs: head_dim 32, KV blocks of 32 tokens.
# Its 4,096-token vocabulary holds both the byte tokenizer's ids and the shipped BPE's (which
# the gateway of a non-tiny plane uses), so either tokenizer's prompts are valid input.
VLLM_TINY = TinyConfig(vocab_size=4096, dim=128, layers=2, heads=4, kv_heads=2, head_dim=32,
                       mlp_hidden=256, block_size=32)  # fmt: skip


def llama_config(config: TinyConfig, max_positions: int = 4096) -> dict[str, object]:
    """The ``config.json`` of the exported model."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": config.vocab_size,
        "hidden_size": config.dim,
        "intermediate_size": config.mlp_hidden,
        "num_hidden_layers": config.layers,
        "num_attention_heads": config.heads,
        "num_key_value_heads": config.kv_heads,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": max_positions,
        "rms_norm_eps": config.norm_eps,
        "rope_theta": config.rope_theta,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "torch_dtype": "float32",
    }


def export_llama(model: TinyTransformer, directory: Path | str) -> Path:
    """Write ``model`` as a float32 Llama checkpoint into ``directory``; returns the directory."""
    from safetensors.numpy import save_file  # only where the vLLM tier is installed

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    c = model.config

    def f32(array: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(array, dtype=np.float32)

    tensors = {
        "model.embed_tokens.weight": f32(model.embedding),
        "model.norm.weight": f32(model.final_norm),
        "lm_head.weight": f32(model.lm_head.T),
    }
    for i in range(c.layers):
        prefix = f"model.layers.{i}."
        tensors[prefix + "self_attn.q_proj.weight"] = f32(model.wq[i].T)
        tensors[prefix + "self_attn.k_proj.weight"] = f32(model.wk[i].T)
        tensors[prefix + "self_attn.v_proj.weight"] = f32(model.wv[i].T)
        tensors[prefix + "self_attn.o_proj.weight"] = f32(model.wo[i].T)
        tensors[prefix + "mlp.gate_proj.weight"] = f32(model.w_gate[i].T)
        tensors[prefix + "mlp.up_proj.weight"] = f32(model.w_up[i].T)
        tensors[prefix + "mlp.down_proj.weight"] = f32(model.w_down[i].T)
        tensors[prefix + "input_layernorm.weight"] = f32(model.attn_norm[i])
        tensors[prefix + "post_attention_layernorm.weight"] = f32(model.mlp_norm[i])
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config_text = json.dumps(llama_config(c), indent=2) + "\n"
    (out / "config.json").write_text(config_text, encoding="utf-8")
    generation = {"bos_token_id": BOS, "eos_token_id": EOS}
    (out / "generation_config.json").write_text(json.dumps(generation) + "\n", encoding="utf-8")
    return out
