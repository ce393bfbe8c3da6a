"""``pdd_core.agent.desired``: pool keys, and the desired-state document parsed and validated."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pdd_core.agent.config import ProcessRole
from pdd_core.agent.desired import (
    UNENACTED_FAMILIES,
    DesiredPool,
    DesiredState,
    DesiredStateError,
    PoolSource,
    check_pool_key,
    not_enacted_reason,
    pool_key,
)
from pdd_core.planner.design import COLOCATED, FAMILIES
from pdd_core.specs import InstanceShape

DOC: dict[str, Any] = {
    "site": "dc-a",
    "version": 3,
    "plan": 12,
    "drain_timeout_s": 30.0,
    "enacted": True,
    "reason": "",
    "pools": [
        {"key": "prefill/h800/tp4xpp4", "role": "prefill", "chip": "h800", "tp": 4, "pp": 4,
         "dp": 1, "ep": 1, "instances": 2, "engine": {"chunk_tokens": 4096, "max_batch": 64},
         "source": "plan"},
        {"key": "main/h20/tp2xdp2xep2", "role": "main", "chip": "h20", "tp": 2, "pp": 1,
         "dp": 2, "ep": 2, "instances": 0, "engine": {}, "source": "override"},
    ],
}  # fmt: skip


def test_a_pool_key_is_role_chip_and_shape_label() -> None:
    assert pool_key("prefill", "h800", InstanceShape(tp=8, pp=4)) == "prefill/h800/tp8xpp4"
    assert pool_key("main", "h20", InstanceShape(tp=2, dp=2, ep=2)) == "main/h20/tp2xdp2xep2"


@pytest.mark.parametrize(
    "key", ["P/h800/tp4", "gateway/h800/tp4", "prefill/h800", "prefill//tp4", "prefill/h800/pp4",
            "prefill/h800/tp4xpp", "x" * 101, ""],
)  # fmt: skip
def test_malformed_pool_keys_are_refused_with_the_expected_form(key: str) -> None:
    expected = re.escape("expected <prefill|relay|main>/<chip>/<shape>")
    with pytest.raises(DesiredStateError, match=expected):
        check_pool_key(key)


def test_the_document_round_trips() -> None:
    state = DesiredState.from_dict(DOC)

    assert state.to_dict() == DOC
    assert state.instances() == {"prefill/h800/tp4xpp4": 2, "main/h20/tp2xdp2xep2": 0}
    pool = state.pool("main/h20/tp2xdp2xep2")
    assert pool is not None
    assert (pool.role, pool.source, pool.shape.chips) == (
        ProcessRole.MAIN, PoolSource.OVERRIDE, 4,
    )  # fmt: skip


def test_no_plan_is_version_0_and_no_pools() -> None:
    state = DesiredState.from_dict({"site": "dc-a", "version": 0, "plan": None,
                                    "drain_timeout_s": 30, "pools": []})  # fmt: skip

    assert (state.version, state.pools, state.drain_timeout_s) == (0, (), 30.0)
    assert (state.enacted, state.reason) == (True, "")  # an older control plane's answer


def test_only_the_aggregated_family_is_not_enacted() -> None:
    # Every family the planner recommends, by the name its result gives (``policy``).
    assert set(UNENACTED_FAMILIES) == {COLOCATED} and set(UNENACTED_FAMILIES) <= set(FAMILIES)
    assert [f for f in FAMILIES if not_enacted_reason(f) is None] == [
        f for f in FAMILIES if f != COLOCATED
    ]
    reason = not_enacted_reason(COLOCATED)
    assert reason is not None and "disaggregated roles only" in reason


def test_a_plan_not_enacted_round_trips_with_its_reason_and_no_pools() -> None:
    doc = {**DOC, "enacted": False, "reason": not_enacted_reason(COLOCATED), "pools": []}

    state = DesiredState.from_dict(doc)

    assert state.to_dict() == doc
    assert (state.enacted, state.pools, state.instances()) == (False, (), {})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"enacted": "no"}, "enacted: true or false, got 'no'"),
        ({"enacted": False, "reason": ""}, "enacted: false needs a reason and no pools"),
        ({"enacted": False, "reason": "aggregated"}, "got reason 'aggregated' and 2 pools"),
        ({"reason": "aggregated"}, "reason: only a plan that is not enacted has one"),
        ({"enacted": False, "reason": 3, "pools": []}, "reason: a string"),
        ({"enacted": False, "reason": "x" * 501, "pools": []}, "at most 500 characters"),
    ],
)
def test_a_malformed_enactment_names_its_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(DesiredStateError, match=message):
        DesiredState.from_dict({**DOC, **change})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": -1}, r"desired.version: an integer in \[0"),
        ({"version": True}, "desired.version"),
        ({"drain_timeout_s": "30"}, "drain_timeout_s: a number"),
        ({"drain_timeout_s": -1.0}, "drain_timeout_s: >= 0"),
        ({"pools": {}}, "pools: a list"),
        ({"site": ""}, "site: a site slug"),
        ({"plan": "12"}, "plan: an id or null"),
    ],
)
def test_a_malformed_document_names_its_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(DesiredStateError, match=message):
        DesiredState.from_dict({**DOC, **change})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"role": "gateway"}, r"pools\[0\].role: one of prefill, relay, main, got 'gateway'"),
        ({"instances": -1}, r"pools\[0\].instances"),
        ({"instances": 1025}, r"pools\[0\].instances"),
        ({"tp": 0}, r"pools\[0\].tp"),
        ({"chip": ""}, r"pools\[0\].chip"),
        ({"engine": []}, r"pools\[0\].engine: an object"),
        ({"source": "guess"}, r"pools\[0\].source: plan or override, got 'guess'"),
        ({"chip": "H 800"}, r"pools\[0\].chip: 'H 800' is not a chip id"),
        ({"key": "prefill/h800/tp4"}, r"pools\[0\].key: 'prefill/h800/tp4' is not its shape's"),
    ],
)
def test_a_malformed_pool_names_its_field(change: dict[str, Any], message: str) -> None:
    pools = [{**DOC["pools"][0], **change}]

    with pytest.raises(DesiredStateError, match=message):
        DesiredState.from_dict({**DOC, "pools": pools})


def test_a_pool_key_may_appear_once() -> None:
    with pytest.raises(DesiredStateError, match="a key appears twice"):
        DesiredState.from_dict({**DOC, "pools": [DOC["pools"][0], DOC["pools"][0]]})


def test_gateways_are_not_pools() -> None:
    with pytest.raises(DesiredStateError, match="role: one of prefill, relay, main"):
        DesiredPool(role=ProcessRole.GATEWAY, chip="h800", instances=1, tp=1)
