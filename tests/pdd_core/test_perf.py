"""Roofline timing, checked against arithmetic done by hand on round-number specs.

Chip "round": 100 TFLOP/s (1e14), 100 GiB, 1 TB/s (1e12 B/s), 100 GB/s scale-up, eta_c = eta_m =
0.5, so effective compute is 5e13 FLOP/s and effective HBM bandwidth 5e11 B/s.
Launch overhead is 10 layers x 10 us = 1e-4 s for both models.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core import perf
from pdd_core.perf import (
    active_weight_bytes,
    decode_step_time,
    decode_step_time_uniform,
    extend_time,
    kv_bytes,
    kv_capacity_tokens,
    kv_split,
    min_tp,
    prefill_time,
    touched_experts,
)
from pdd_core.specs import Attention, ChipSpec, InstanceShape, ModelSpec

EXACT = 1e-12

CHIP = ChipSpec(
    id="round",
    name="Round chip",
    bf16_tflops=100,
    hbm_gib=100,
    hbm_tbps=1,
    scaleup_gbytes_per_s=100,
    scaleout_gbits_per_s=400,
    price_per_hour=1,
    compute_efficiency=0.5,
    memory_efficiency=0.5,
)

# Dense GQA: 10B params in BF16 (2e10 bytes), 10 layers, 32 query heads of 128 (d_attn 4096),
# 8 KV heads. KV per token = 2 x 10 layers x 8 heads x 128 x 2 bytes = 40,960 bytes.
DENSE = ModelSpec(
    id="dense",
    name="Dense GQA",
    total_params_b=10,
    active_params_b=10,
    layers=10,
    hidden_size=4096,
    attention=Attention.GQA,
    attention_heads=32,
    kv_heads=8,
    head_dim=128,
)

# MLA MoE with the dense model's layers, hidden size and query heads: 100B total, 10B active,
# FP8 weights (1 byte/param), 64 experts, top-4.
# Routed params = (100 - 10)e9 / (1 - 4/64) = 96e9; non-expert = 4e9; one expert = 1.5e9.
# KV per token = 10 layers x (512 + 64) x 2 bytes = 11,520 bytes.
MOE = replace(
    DENSE,
    id="moe",
    name="MLA MoE",
    total_params_b=100,
    attention=Attention.MLA,
    kv_heads=32,
    kv_lora_rank=512,
    rope_dim=64,
    weight_bytes_per_param=1,
    moe_experts=64,
    moe_top_k=4,
)


def test_kv_bytes_per_token_for_gqa_and_mla() -> None:
    assert kv_bytes(DENSE, 1) == 40_960
    assert kv_bytes(DENSE, 1000) == 40_960_000
    assert kv_bytes(MOE, 1) == 11_520


def test_dense_prefill_is_compute_bound() -> None:
    # FLOPs = 2 x 10e9 x 1000 + 4 x 10 x 4096 x 1000 x (0 + 500) = 2e13 + 8.192e10 = 2.008192e13
    # compute = 2.008192e13 / 5e13 = 0.4016384 s
    # bytes = 2e10 weights + KV(0) + KV(1000) = 2e10 + 4.096e7, plus element-wise traffic
    #   1000 tokens x 4096 x 2 B x 12 vectors x 10 layers = 9.8304e8 -> 2.10240e10 / 5e11 = 0.042048
    t = prefill_time(DENSE, CHIP, new_tokens=1000)

    assert t.compute_s == pytest.approx(0.4016384, rel=EXACT)
    assert t.memory_s == pytest.approx(0.042048, rel=EXACT)
    assert t.comm_s == 0
    assert t.overhead_s == pytest.approx(1e-4, rel=EXACT)
    assert t.seconds == pytest.approx(0.4017384, rel=EXACT)
    assert t.bound == "compute"


def test_dense_prefill_with_cache_batch_and_tensor_parallel() -> None:
    # batch 2, 1000 new over 3000 cached, tp 2:
    # FLOPs = 2 x (2e13 + 4 x 10 x 4096 x 1000 x 3500) = 2 x (2e13 + 5.7344e11) = 4.114688e13
    # compute = 4.114688e13 / (5e13 x 2) = 0.4114688 s
    # bytes/chip = 2e10 / 2 + 2 x 4000 x 40,960 / 2 heads-ways + element-wise 2000 x 4096 x 2 x 12
    #   x 10 = 1e10 + 1.6384e8 + 1.96608e9 = 1.212992e10 -> 0.02425984 s
    # comm: message = 2000 tokens x 4096 x 2 B = 16,384,000 B, above the measured table's 1 MiB:
    #   tp-2 column at 1 MiB, scaled to a 100 GB/s fabric: 3.7e-6 + (19.9e-6 - 3.7e-6) x 4.5
    #   = 7.66e-5 s; the other 15,335,424 B move at 2 x 1/2 / (0.8 x 1e11): 1.916928e-4 s;
    #   one all-reduce = 2.682928e-4 s, x 2 per layer x 10 layers = 5.365856e-3 s
    t = prefill_time(DENSE, CHIP, new_tokens=1000, cached_tokens=3000, tp=2, batch=2)

    assert t.compute_s == pytest.approx(0.4114688, rel=EXACT)
    assert t.memory_s == pytest.approx(0.02425984, rel=EXACT)
    assert t.comm_s == pytest.approx(5.365856e-3, rel=EXACT)
    assert t.seconds == pytest.approx(0.4114688 + 5.365856e-3 + 1e-4, rel=EXACT)
    assert t.bound == "compute"


def test_dense_decode_step_is_memory_bound() -> None:
    # contexts 1000 and 3000: b = 2, sum c = 4000
    # FLOPs = 2 x 10e9 x 2 + 4 x 10 x 4096 x (4000 + 2/2) = 4e10 + 655,523,840 = 40,655,523,840
    #   -> / 5e13 = 8.131104768e-4 s
    # bytes = 2e10 + KV(4000 + 2) + element-wise 2 x 4096 x 2 x 12 x 10 = 2e10 + 1.6392192e8
    #   + 1,966,080 = 20,165,888,000 -> / 5e11 = 0.040331776 s
    t = decode_step_time(DENSE, CHIP, [1000, 3000])

    assert t.compute_s == pytest.approx(8.131104768e-4, rel=EXACT)
    assert t.memory_s == pytest.approx(0.040331776, rel=EXACT)
    assert t.seconds == pytest.approx(0.040431776, rel=EXACT)
    assert t.bound == "memory"
    assert decode_step_time_uniform(DENSE, CHIP, 2, 2000) == t


def test_gqa_kv_is_replicated_beyond_kv_heads() -> None:
    assert kv_split(DENSE, 4) == 4
    assert kv_split(DENSE, 16) == 8
    # MLA's one latent is copied to every TP rank; only pipeline stages split it.
    assert kv_split(MOE, 16) == 1
    assert kv_split(MOE, InstanceShape(tp=2, pp=4)) == 4


def test_dense_kv_capacity() -> None:
    # tp 1: 100 x 2^30 x 0.9 = 96,636,764,160 - 2e10 = 76,636,764,160 / 40,960 = 1,871,014.75
    assert kv_capacity_tokens(DENSE, CHIP, 1) == 1_871_014
    # tp 16 (KV heads replicated twice): (16 x 96,636,764,160 - 2e10) / (40,960 x 16 / 8)
    #   = 1,526,188,226,560 / 81,920 = 18,630,227.375
    assert kv_capacity_tokens(DENSE, CHIP, 16) == 18_630_227
    assert min_tp(DENSE, CHIP) == 1
    # 2,000,000 tokens need more than tp 1 holds: tp 2 gives (193,273,528,320 - 2e10) / 40,960
    assert min_tp(DENSE, CHIP, kv_tokens=2_000_000) == 2


def test_touched_experts_grow_with_batch_under_uniform_routing() -> None:
    # b = 1: 64 x (1 - 60/64) = 4 (exactly top-k); b = 2: 64 x (1 - (15/16)^2) = 64 x 31/256
    assert touched_experts(MOE, 1) == pytest.approx(4, rel=EXACT)
    assert touched_experts(MOE, 2) == pytest.approx(7.75, rel=EXACT)
    assert touched_experts(MOE, 100_000) == pytest.approx(64, rel=EXACT)
    assert touched_experts(DENSE, 10) == 0


def test_moe_active_weight_bytes() -> None:
    # b = 1: 4e9 non-expert + 4 x 1.5e9 = 1e10 bytes, i.e. exactly the active params at FP8.
    # b = 2: 4e9 + 7.75 x 1.5e9 = 1.5625e10; a long prefill reads all 1e11.
    assert active_weight_bytes(MOE, 1) == pytest.approx(1e10, rel=EXACT)
    assert active_weight_bytes(MOE, 2) == pytest.approx(1.5625e10, rel=EXACT)
    assert active_weight_bytes(MOE, 100_000) == pytest.approx(1e11, rel=EXACT)
    assert active_weight_bytes(DENSE, 5) == 2e10


def test_mla_attention_is_absorbed_in_decode_only() -> None:
    # Absorbed MLA: 2 x 32 heads x (2 x 512 + 64) = 69,632 FLOPs per pair; prefill form and GQA:
    # 4 x heads x head_dim = 16,384.
    assert perf.attention_flops_per_pair(MOE, absorbed=True) == 69_632
    assert perf.attention_flops_per_pair(MOE, absorbed=False) == 16_384
    assert perf.attention_flops_per_pair(DENSE, absorbed=True) == 16_384


def test_mla_moe_decode_step() -> None:
    # contexts 2000 and 6000: b = 2, sum c = 8000; decode scores in MLA's absorbed form
    # FLOPs = 2 x 10e9 x 2 + 10 x 69,632 x 8001 = 4e10 + 5,571,256,320 = 45,571,256,320
    # compute = 45,571,256,320 / 5e13 = 9.114251264e-4 s
    # bytes = 1.5625e10 (two tokens touch 7.75 experts) + KV(8002) = 8002 x 11,520 = 92,183,040
    #   = 15,717,183,040, plus element-wise 1,966,080 = 15,719,149,120 -> / 5e11 = 0.03143829824 s
    t = decode_step_time(MOE, CHIP, [2000, 6000])

    assert t.compute_s == pytest.approx(9.114251264e-4, rel=EXACT)
    assert t.memory_s == pytest.approx(0.03143829824, rel=EXACT)
    assert t.seconds == pytest.approx(0.03153829824, rel=EXACT)
    assert t.bound == "memory"


def test_mla_moe_decode_step_tensor_parallel() -> None:
    # tp 4: weights 1.5625e10 / 4 = 3.90625e9; the MLA latent is copied to every TP rank, so each
    #   chip reads all 92,183,040 B of KV; element-wise 1,966,080 B -> 4,000,399,120 / 5e11
    #   = 0.00800079824 s
    # comm: message = 2 x 4096 x 2 = 16,384 B; the measured tp-4 table interpolates below its
    #   smallest-message latency (4.8 us), which is the floor: 4.8e-6 s x 20 = 9.6e-5 s
    t = decode_step_time(MOE, CHIP, [2000, 6000], tp=4)

    assert t.memory_s == pytest.approx(0.00800079824, rel=EXACT)
    assert t.comm_s == pytest.approx(9.6e-5, rel=EXACT)
    assert t.compute_s == pytest.approx(9.114251264e-4 / 4, rel=EXACT)
    assert t.seconds == pytest.approx(0.00800079824 + 9.6e-5 + 1e-4, rel=EXACT)
    assert t.bound == "memory"


def test_mla_moe_prefill_reads_all_experts() -> None:
    # 2000 new tokens touch all 64 experts: bytes = 1e11 + KV(2000) + element-wise 2000 x 4096 x 2
    #   x 12 x 10 = 1e11 + 2.304e7 + 1.96608e9 -> 0.20397824 s
    # FLOPs = 2 x 10e9 x 2000 + 4 x 10 x 4096 x 2000 x 1000 = 4e13 + 3.2768e11 -> 0.8065536 s
    t = prefill_time(MOE, CHIP, new_tokens=2000)

    assert t.memory_s == pytest.approx(0.20397824, rel=EXACT)
    assert t.compute_s == pytest.approx(0.8065536, rel=EXACT)
    assert t.bound == "compute"


def test_mla_moe_capacity_and_min_tp() -> None:
    # tp 1: 96,636,764,160 < 1e11 of weights -> 0, never negative.
    # tp 2: each chip holds 5e10 of weights and a full copy of the latent: (96,636,764,160 - 5e10)
    #   / 11,520 = 4,048,330.22
    assert kv_capacity_tokens(MOE, CHIP, 1) == 0
    assert kv_capacity_tokens(MOE, CHIP, 2) == 4_048_330
    # dp-attention instead: 2 ranks of tp 1 share the experts (ep 2) and hold their own sequences.
    # Each chip: 4e9 dense + 9.6e10 / 2 experts = 5.2e10 -> (96,636,764,160 - 5.2e10) / 11,520
    #   = 3,874,719 tokens per rank, 7,749,438 for the instance.
    shape = InstanceShape(tp=1, dp=2, ep=2)
    assert kv_capacity_tokens(MOE, CHIP, shape) == 7_749_438
    assert perf.kv_rank_tokens(MOE, CHIP, shape) == 3_874_719
    assert min_tp(MOE, CHIP) == 2


def test_model_too_big_for_any_tp_raises() -> None:
    tiny_chip = ChipSpec(
        id="tiny",
        name="Tiny",
        bf16_tflops=1,
        hbm_gib=0.001,
        hbm_tbps=1,
        scaleup_gbytes_per_s=1,
        scaleout_gbits_per_s=1,
        price_per_hour=0,
    )
    with pytest.raises(ValueError, match="does not fit"):
        min_tp(MOE, tiny_chip)


def test_no_new_tokens_is_no_pass() -> None:
    assert prefill_time(DENSE, CHIP, new_tokens=0, cached_tokens=5000) == perf.ZERO_TIMING


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="tp"):
        prefill_time(DENSE, CHIP, 10, tp=0)
    with pytest.raises(ValueError, match="new_tokens"):
        prefill_time(DENSE, CHIP, -1)
    with pytest.raises(ValueError, match="context_lengths"):
        decode_step_time(DENSE, CHIP, [])
    with pytest.raises(ValueError, match="context_lengths"):
        decode_step_time(DENSE, CHIP, [5, -1])


def test_comm_bound_is_reported() -> None:
    slow_link = ChipSpec(
        id="slow-link",
        name="Slow link",
        bf16_tflops=1000,
        hbm_gib=100,
        hbm_tbps=10,
        scaleup_gbytes_per_s=0.1,
        scaleout_gbits_per_s=1,
        price_per_hour=0,
    )
    assert prefill_time(DENSE, slow_link, 4000, tp=8).bound == "comm"


@settings(max_examples=100, deadline=None)
@given(
    context=st.integers(min_value=0, max_value=200_000),
    tp=st.sampled_from([1, 2, 4, 8]),
    model=st.sampled_from([DENSE, MOE]),
)
def test_one_token_extend_is_one_decode_step(context: int, tp: int, model: ModelSpec) -> None:
    # DOMAIN.md section 5: extend is the prefill formula; at k = 1 it must cost one decode step.
    assert extend_time(model, CHIP, 1, context, tp=tp) == decode_step_time(
        model, CHIP, [context], tp=tp
    )


@settings(max_examples=100, deadline=None)
@given(
    batch=st.integers(min_value=1, max_value=256),
    context=st.integers(min_value=0, max_value=100_000),
    model=st.sampled_from([DENSE, MOE]),
)
def test_decode_time_never_falls_as_batch_or_context_grows(
    batch: int, context: int, model: ModelSpec
) -> None:
    base = decode_step_time_uniform(model, CHIP, batch, context).seconds
    assert decode_step_time_uniform(model, CHIP, batch + 1, context).seconds >= base
    assert decode_step_time_uniform(model, CHIP, batch, context + 1).seconds >= base


def test_seconds_is_roofline_plus_comm_plus_overhead() -> None:
    t = prefill_time(MOE, CHIP, 3000, 10_000, tp=8, batch=3)
    assert t.seconds == pytest.approx(max(t.compute_s, t.memory_s) + t.comm_s + t.overhead_s)


@pytest.mark.parametrize(
    ("change", "field"),
    [({"kv_bytes_per_elem": 1e306}, "kv_bytes_per_elem"),
     ({"weight_bytes_per_param": 1e300}, "weight_bytes_per_param")],
)  # fmt: skip
def test_a_model_whose_bytes_overflow_a_float_is_refused(change: dict, field: str) -> None:
    """Finite figures whose product is not (the schema fuzzer's 500 on a model profile)."""
    with pytest.raises(ValueError, match=field):
        replace(DENSE, **change)
