"""Shared topologies for the simulator tests: a tiny two-site deployment with no jitter."""

from __future__ import annotations

from typing import Any

import pytest

from pdd_core.specs import Topology, topology_from_dict

MODEL = "deepseek-v3"


def pool(site: str, chip: str, role: str, *, instances: int = 1, pp: int = 1) -> dict[str, Any]:
    """A pool of ``MODEL`` at tp 8 (``pp`` stages) for a topology dict."""
    return {"site": site, "chip": chip, "model": MODEL, "role": role, "instances": instances,
            "tp": 8, "pp": pp}  # fmt: skip


def two_sites(
    *, wan_gbps: float = 40.0, wan_jitter: bool = False, md_instances: int = 1
) -> dict[str, Any]:
    jitter = {"jitter_ms": 2.0, "bandwidth_jitter": 0.2} if wan_jitter else {}
    return {
        "sites": [{"id": "a"}, {"id": "b"}],
        "links": [
            {
                "id": "a-fabric",
                "kind": "rdma",
                "source_site": "a",
                "target_site": "a",
                "bandwidth_gbps": 400,
                "rtt_ms": 0.01,
            },
            {
                "id": "a-b",
                "kind": "wan",
                "source_site": "a",
                "target_site": "b",
                "bandwidth_gbps": wan_gbps,
                "rtt_ms": 20,
                **jitter,
            },
        ],
        "pools": [
            pool("a", "h800", "P", pp=2),
            pool("a", "h800", "RLD", pp=2),
            pool("b", "h20", "MD", instances=md_instances),
        ],
    }


def baseline() -> Topology:
    raw = two_sites()
    raw["pools"] = [pool("a", "h800", "P", pp=2), pool("a", "h800", "MD", pp=2)]
    return topology_from_dict(raw)


@pytest.fixture
def pdd_topology() -> Topology:
    return topology_from_dict(two_sites())


@pytest.fixture
def baseline_topology() -> Topology:
    return baseline()
