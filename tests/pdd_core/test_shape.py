"""Instance shapes: the layout rules, whole-node cost and the per-rank KV check."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.specs import (
    InstanceShape,
    ShapeError,
    ShapeRule,
    check_request_fits,
    check_shape,
    kv_tokens_per_rank,
    load_chips,
    load_models,
    pool_cost_per_hour,
    pool_nodes,
    valid_shapes,
)

CHIPS = load_chips()
MODELS = load_models()


def _rule(model: str, chip: str, shape: InstanceShape) -> ShapeRule:
    with pytest.raises(ShapeError) as info:
        check_shape(MODELS[model], CHIPS[chip], shape)
    return info.value.rule


def test_tp_must_divide_the_attention_heads() -> None:
    # The TP 17: 64 heads do not split 17 ways.
    assert _rule("ref-1t-mla", "gpu-a", InstanceShape(tp=17)) is ShapeRule.TP_HEADS


def test_tp_must_stay_inside_one_scaleup_domain() -> None:
    # TP 64 divides 64 heads but spans eight 8-GPU NVLink domains.
    assert _rule("ref-1t-mla", "gpu-a", InstanceShape(tp=64)) is ShapeRule.TP_DOMAIN
    # CloudMatrix384 is one UB domain of 384 NPUs: TP 16 of Kimi K2 stays inside it.
    check_shape(MODELS["kimi-k2"], CHIPS["ascend-910c"], InstanceShape(tp=16))


def test_gqa_tp_must_divide_or_be_a_multiple_of_the_kv_heads() -> None:
    # Llama-3.1-70B: 64 heads, 8 KV heads. tp 8 shards them, tp 4 too; a 6-way split fails heads.
    check_shape(MODELS["llama-3.1-70b"], CHIPS["h100-sxm"], InstanceShape(tp=8))
    check_shape(MODELS["llama-3.1-70b"], CHIPS["h100-sxm"], InstanceShape(tp=4))
    # Qwen3-235B: 64 heads, 4 KV heads: tp 8 replicates each KV head twice (allowed).
    check_shape(MODELS["qwen3-235b-a22b"], CHIPS["h200"], InstanceShape(tp=8))


def test_weights_must_fit() -> None:
    # A 1 TB FP8 model on one 8-chip GPU-A node: 130 GB of weights per chip against 61.8 GB usable.
    assert _rule("ref-1t-mla", "gpu-a", InstanceShape(tp=8)) is ShapeRule.WEIGHTS_FIT
    check_shape(MODELS["ref-1t-mla"], CHIPS["gpu-a"], InstanceShape(tp=8, pp=3))


def test_dp_attention_and_ep_need_moe_and_the_whole_stage() -> None:
    llama = "llama-3.1-70b"
    assert _rule(llama, "h100-sxm", InstanceShape(tp=4, dp=2)) is ShapeRule.DP_ATTENTION
    assert _rule(llama, "h100-sxm", InstanceShape(tp=8, ep=8)) is ShapeRule.EP_GROUP
    assert _rule("deepseek-v3", "h200", InstanceShape(tp=1, dp=8, ep=4)) is ShapeRule.EP_GROUP
    check_shape(MODELS["deepseek-v3"], CHIPS["h200"], InstanceShape(tp=1, dp=8, ep=8))


def test_pipeline_deeper_than_the_layers_is_refused() -> None:
    assert _rule("tiny-test", "h100-sxm", InstanceShape(tp=1, pp=3)) is ShapeRule.PP_LAYERS


def test_positive_degrees() -> None:
    with pytest.raises(ShapeError) as info:
        InstanceShape(tp=0)
    assert info.value.rule is ShapeRule.POSITIVE


def test_a_request_must_fit_one_data_parallel_rank() -> None:
    model, chip = MODELS["deepseek-v3"], CHIPS["h200"]
    shape = InstanceShape(tp=1, dp=8, ep=8)
    room = kv_tokens_per_rank(model, chip, shape)
    check_request_fits(model, chip, shape, room)
    with pytest.raises(ShapeError) as info:
        check_request_fits(model, chip, shape, room + 1)
    assert info.value.rule is ShapeRule.KV_PER_RANK


def test_cost_counts_whole_nodes() -> None:
    chip = CHIPS["gpu-a"]  # 8 per node, $0.80 per chip-hour
    assert pool_nodes(chip, InstanceShape(tp=4), 3) == 2  # 12 chips -> 2 nodes
    assert pool_cost_per_hour(chip, InstanceShape(tp=4), 3) == pytest.approx(16 * 0.8)
    assert pool_nodes(chip, InstanceShape(tp=8, pp=3), 2) == 6
    assert pool_nodes(chip, InstanceShape(tp=1), 0) == 0


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(sorted(MODELS)),
    chip=st.sampled_from(sorted(CHIPS)),
)
def test_every_listed_shape_is_valid_and_fits_a_token(model: str, chip: str) -> None:
    for shape in valid_shapes(MODELS[model], CHIPS[chip], max_chips=64):
        check_shape(MODELS[model], CHIPS[chip], shape)
        assert shape.tp <= CHIPS[chip].scaleup_domain
        assert MODELS[model].attention_heads % shape.tp == 0
        assert kv_tokens_per_rank(MODELS[model], CHIPS[chip], shape) >= 1


@settings(max_examples=200, deadline=None)
@given(
    tp=st.integers(min_value=1, max_value=128),
    pp=st.integers(min_value=1, max_value=8),
    dp=st.sampled_from([1, 2, 4, 8, 16]),
    model=st.sampled_from(sorted(MODELS)),
    chip=st.sampled_from(sorted(CHIPS)),
)
def test_check_shape_accepts_exactly_the_rules(
    tp: int, pp: int, dp: int, model: str, chip: str
) -> None:
    spec, hw = MODELS[model], CHIPS[chip]
    shape = InstanceShape(tp=tp, pp=pp, dp=dp, ep=tp * dp if dp > 1 else 1)
    try:
        check_shape(spec, hw, shape)
    except ShapeError as exc:
        assert exc.rule in set(ShapeRule)
        return
    assert spec.attention_heads % tp == 0
    assert tp <= hw.scaleup_domain
    assert hw.scaleup_domain % tp == 0
    assert pp <= spec.layers
    assert dp == 1 or spec.is_moe
    assert kv_tokens_per_rank(spec, hw, shape) >= 1


@settings(max_examples=100, deadline=None)
@given(
    instances=st.integers(min_value=0, max_value=64),
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.integers(min_value=1, max_value=4),
)
def test_node_cost_covers_every_chip_and_wastes_less_than_a_node(
    instances: int, tp: int, pp: int
) -> None:
    chip = CHIPS["h100-sxm"]
    shape = InstanceShape(tp=tp, pp=pp)
    nodes = pool_nodes(chip, shape, instances)
    assert nodes * chip.chips_per_node >= instances * shape.chips
    assert nodes * chip.chips_per_node - instances * shape.chips < chip.chips_per_node
