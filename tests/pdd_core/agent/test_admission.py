"""The gateway's admission: decode slots held from routing to release, WAN flows and the line's
utilisation, and the decode path a request falls back to when its own has no free slot."""

from __future__ import annotations

import math

import pytest

from pdd_core.agent.gateway import admission as admission_module
from pdd_core.agent.gateway.admission import LOAD_WINDOW_S, Admission, servable
from pdd_core.routing import Pipeline


def test_a_route_holds_a_slot_on_each_decode_agent_until_released() -> None:
    slots = Admission({"rld-0": 2, "md-0": 1, "md-1": 1})

    slots.hold(1, ("rld-0", "md-0"), 0.0)
    slots.hold(2, ("rld-0", None), 0.0)

    assert slots.held == {"rld-0": 2, "md-0": 1, "md-1": 0}
    assert slots.with_room(["rld-0", "md-0", "md-1"]) == ["md-1"]


def test_with_room_is_least_loaded_first_and_stable_on_ties() -> None:
    slots = Admission({"md-0": 4, "md-1": 4, "md-2": 4})
    slots.hold(1, ("md-0",), 0.0)

    assert slots.with_room(["md-0", "md-1", "md-2"]) == ["md-1", "md-2", "md-0"]
    assert slots.with_room(["md-2", "md-1"]) == ["md-2", "md-1"]


def test_the_relay_slot_ends_at_the_handoff_and_nothing_is_released_twice() -> None:
    slots = Admission({"rld-0": 1, "md-0": 1})
    slots.hold(7, ("rld-0", "md-0"), 0.0)

    slots.end_slot(7, "rld-0")  # the handoff
    after_handoff = dict(slots.held)
    slots.end_slot(7, "rld-0")  # a second handoff frame
    slots.end_slot(7, None)
    slots.release(7)
    slots.release(7)  # finished, then the API's own release

    assert after_handoff == {"rld-0": 0, "md-0": 1}
    assert slots.held == {"rld-0": 0, "md-0": 0}


def test_releasing_an_unknown_ticket_changes_nothing() -> None:
    slots = Admission({"md-0": 1})
    slots.hold(1, ("md-0",), 0.0)

    slots.release(2)
    slots.end_slot(2, "md-0")

    assert slots.held == {"md-0": 1}


def test_a_wan_flow_is_on_the_line_from_routing_to_kv_done() -> None:
    slots = Admission({"md-0": 4})
    slots.hold(1, ("md-0",), 1e6)
    slots.hold(2, ("md-0",), 0.0)  # nothing to ship (P-RLD, or all of it in MD's DRC)
    flows_then = dict(slots.wan)

    slots.end_transfer(1)
    slots.release(1)

    assert flows_then == {1: 1e6}
    assert slots.wan == {}
    assert slots.held == {"md-0": 1}


def test_utilisation_is_the_exponential_average_of_the_line_being_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(admission_module.time, "monotonic", lambda: clock[0])
    slots = Admission({"md-0": 4})

    slots.hold(1, ("md-0",), 1e6)  # busy from t=100
    busy = slots.utilisation(100.0 + LOAD_WINDOW_S)
    clock[0] = 100.0 + LOAD_WINDOW_S
    slots.end_transfer(1)  # idle from t=110
    later = slots.utilisation(100.0 + 2 * LOAD_WINDOW_S)

    assert busy == pytest.approx(1 - math.exp(-1))
    assert later == pytest.approx((1 - math.exp(-1)) * math.exp(-1))


@pytest.mark.parametrize(
    ("pipeline", "relay_free", "main_free", "served"),
    [
        (Pipeline.P_MD, False, True, Pipeline.P_MD),
        (Pipeline.P_MD, True, False, Pipeline.P_RLD),
        (Pipeline.P_RLD_MD, True, True, Pipeline.P_RLD_MD),
        (Pipeline.P_RLD_MD, False, True, Pipeline.P_MD),
        (Pipeline.P_RLD_MD, True, False, Pipeline.P_RLD),
        (Pipeline.P_RLD, True, False, Pipeline.P_RLD),
        (Pipeline.P_RLD, False, True, Pipeline.P_MD),
        (Pipeline.P_MD, False, False, None),
        (Pipeline.P_RLD_MD, False, False, None),
        (Pipeline.P_RLD, False, False, None),
    ],
)
def test_a_pipeline_without_a_free_slot_falls_back_to_the_other_decode_path(
    pipeline: Pipeline, relay_free: bool, main_free: bool, served: Pipeline | None
) -> None:
    chosen, reason = servable(pipeline, "routed", relay_free, main_free)

    assert chosen is served
    assert (reason == "routed") is (chosen is pipeline)
