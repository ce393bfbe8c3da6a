"""Shared topologies for the simulator tests: a tiny two-site deployment with no jitter."""

from __future__ import annotations

from typing import Any

import pytest

from pdd_core.specs import Topology, topology_from_dict

MODEL = "deepseek-v3"


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
            {
                "site": "a",
                "chip": "h800",
                "model": MODEL,
                "role": "P",
                "instances": 1,
                "tp": 8,
                "pp": 2,
            },
            {
                "site": "a",
                "chip": "h800",
                "model": MODEL,
                "role": "RLD",
                "instances": 1,
                "tp": 8,
                "pp": 2,
            },
            {
                "site": "b",
                "chip": "h20",
                "model": MODEL,
                "role": "MD",
                "instances": md_instances,
                "tp": 8,
            },
        ],
    }


def baseline() -> Topology:
    raw = two_sites()
    raw["pools"] = [
        {
            "site": "a",
            "chip": "h800",
            "model": MODEL,
            "role": "P",
            "instances": 1,
            "tp": 8,
            "pp": 2,
        },
        {
            "site": "a",
            "chip": "h800",
            "model": MODEL,
            "role": "MD",
            "instances": 1,
            "tp": 8,
            "pp": 2,
        },
    ]
    return topology_from_dict(raw)


@pytest.fixture
def pdd_topology() -> Topology:
    return topology_from_dict(two_sites())


@pytest.fixture
def baseline_topology() -> Topology:
    return baseline()
