"""The stored pipeline and handoff-mode choices are pdd_core.routing's, which agents report."""

from __future__ import annotations

from controlplane.core.choices import HandoffMode, Pipeline
from pdd_core import routing


def test_pipelines_are_the_pdd_pipelines_of_routing() -> None:
    pdd = {routing.Pipeline.P_MD, routing.Pipeline.P_RLD_MD, routing.Pipeline.P_RLD}

    assert set(Pipeline.values) == {p.value for p in pdd}


def test_handoff_modes_are_routings_with_none_stored_blank() -> None:
    modes = {m.value for m in routing.HandoffMode} - {routing.HandoffMode.NONE.value}

    assert set(HandoffMode.values) == modes | {""}
