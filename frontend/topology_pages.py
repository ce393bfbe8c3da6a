"""Topology as a picture, and the catalogue of chips and models on its own page.

The picture shows each site with its pools (role, chip, model, instances running against
desired) and its gateway and WAN agents, and each WAN link between two sites with its capacity,
round trip and live utilisation over a stated window. Below it the agents: health, last
heartbeat, uptime since their latest start, restarts, address and config version, updated live
from ``/ws/live/``'s state (``telemetry.state``).

Where a plan is active each site shows its desired state's pools (``agents.desired``: the
plan's counts, or an operator's override) against the healthy agents that report each pool,
with their rollout states (starting, serving, draining, stopped); an agent that reports no pool
(an older agent) counts for its site's pool of its role. An active plan this plane does not
enact (an aggregated design) says so in one sentence, and each site shows the pools its healthy
agents run, kept (an agent that reports no pool under a row of its role). Without a plan the
inventory's pools show against the healthy agents of their role in their site.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from controlplane.agents.desired import KEPT, PoolRollout, active_plan_not_enacted, pool_rollouts
from controlplane.agents.selectors import agent_list
from controlplane.inventory import selectors as inventory
from controlplane.telemetry import integrations
from controlplane.telemetry import selectors as telemetry
from controlplane.telemetry.state import state_read
from frontend.access import operator_page
from frontend.plan_verdict import not_enacted_sentence

# The agent registry's roles (pdd_core.agent.config.ProcessRole) that run a pool's role.
POOL_ROLE_OF_AGENT = {"prefill": "P", "relay": "RLD", "main": "MD"}
AGENT_ROLE_OF_POOL = {v: k for k, v in POOL_ROLE_OF_AGENT.items()}
# The live WAN figure: the newest closed 5 s window of the link's source site.
WAN_WINDOW_S = 5


def _running(agents: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    running: dict[tuple[str, str], int] = {}
    for agent in agents:
        role = POOL_ROLE_OF_AGENT.get(agent["role"])
        if role and agent["healthy"]:
            running[(agent["site"], role)] = running.get((agent["site"], role), 0) + 1
    return running


def _site_wan_gbps(slug: str) -> float:
    points = telemetry.series(window_s=WAN_WINDOW_S, scope="site", key=slug, points=12)
    point = telemetry.latest_closed(points, WAN_WINDOW_S)
    return float(point["wan_gbps"]) if point else 0.0


def _plan_pool_row(row: PoolRollout, chip_names: dict[str, str]) -> dict[str, Any]:
    if not row.chip:  # kept agents that report no pool: their role's row, no key to match
        return {"role": POOL_ROLE_OF_AGENT[row.role], "agent_role": row.role, "key": "",
                "what": "no pool reported", "detail": f"{row.role} agents", "model": "",
                "slug": "", "desired": row.desired, "running": row.running, "source": KEPT,
                "states": row.states}  # fmt: skip
    return {"role": POOL_ROLE_OF_AGENT[row.role], "agent_role": row.role, "key": row.key,
            "what": chip_names.get(row.chip, row.chip), "detail": f"{row.shape} per instance",
            "desired": row.desired, "running": row.running, "source": row.source,
            "states": row.states}  # fmt: skip


def topology_picture() -> dict[str, Any]:
    """Sites with their pools and agents, and the WAN links, as the picture draws them."""
    plan = integrations.active_plan()
    agents = integrations.agents() or []
    site_list = list(inventory.site_list())
    rollouts = pool_rollouts(site_list, list(agent_list())) if plan is not None else []
    reason = active_plan_not_enacted() if plan is not None else None
    chip_names = {c.slug: c.name for c in inventory.chip_model_list()}
    running = _running(agents)
    sites = []
    every_pool = list(inventory.instance_pool_list())
    for site in site_list:
        if plan is not None:
            pools = [_plan_pool_row(r, chip_names) for r in rollouts if r.site == site.slug]
        else:
            pools = [
                {
                    "role": p.role,
                    "agent_role": AGENT_ROLE_OF_POOL[p.role],
                    "key": "",
                    "what": p.chip.name,
                    "detail": f"{p.chips_per_instance} chips per instance",
                    "model": p.model.name,
                    "slug": p.slug,
                    "desired": p.instance_count,
                    "running": running.get((site.slug, p.role), 0),
                    "source": "inventory",
                    "states": {},
                }
                for p in every_pool
                if p.site_id == site.pk
            ]
        sites.append({
            "site": site,
            "pools": pools,
            "others": [a for a in agents if a["site"] == site.slug
                       and a["role"] not in POOL_ROLE_OF_AGENT],
        })  # fmt: skip
    links: list[dict[str, Any]] = []
    for link in inventory.link_list():
        gbps = _site_wan_gbps(link.source.slug) if link.kind == "wan" else None
        links.append({"link": link, "gbps": gbps,
                      "share": gbps / link.bandwidth_gbps if gbps is not None
                      and link.bandwidth_gbps else None})  # fmt: skip
    return {
        "sites": sites,
        "row": _row(sites, [row for row in links if row["link"].kind == "wan"]),
        "links": links,
        "desired_from": f"the active plan (config v{plan.version}) or an operator's override"
        if plan is not None
        else "the inventory's pools (no plan is active)",
        "not_enacted": None if reason is None else not_enacted_sentence(reason),
    }


def _row(sites: list[dict[str, Any]], wan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The picture left to right: each site, then the WAN links between it and the next site;
    links that join sites further apart follow at the end."""
    row: list[dict[str, Any]] = []
    placed: set[str] = set()
    for index, here in enumerate(sites):
        row.append({"kind": "site", **here})
        if index + 1 == len(sites):
            break
        there = sites[index + 1]
        pair = {here["site"].slug, there["site"].slug}
        between = [w for w in wan if {w["link"].source.slug, w["link"].target.slug} == pair]
        placed |= {w["link"].slug for w in between}
        row.append({"kind": "links", "links": between})
    rest = [w for w in wan if w["link"].slug not in placed]
    if rest:
        row.append({"kind": "links", "links": rest})
    return row


@operator_page
def topology(request: HttpRequest) -> HttpResponse:
    """The picture, the links and the agents; live WAN figures and agent states."""
    picture = topology_picture()
    context = {
        **picture,
        "state": state_read(),
        "live_sites": [entry["site"].slug for entry in picture["sites"]],
        "wan_window_s": WAN_WINDOW_S,
    }
    return render(request, "frontend/dashboard/topology.html", context)


@operator_page
def catalogue(request: HttpRequest) -> HttpResponse:
    """Every chip and model the planner may use, with the source of each figure."""
    context = {"chips": inventory.chip_model_list(), "models": inventory.model_profile_list()}
    return render(request, "frontend/dashboard/catalogue.html", context)
