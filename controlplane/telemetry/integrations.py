"""The deployment as telemetry shows it: the active plan and the agent registry.

Planning and agents sit above telemetry in the app graph (planning reads live telemetry to
build workloads; agents read plans), so telemetry never imports them. Instead each of those
apps hands telemetry one typed reader in its ``AppConfig.ready`` (``provide_active_plan``,
``provide_agents``). Without them (an app not installed) the figures they give are absent:
no active plan, no agents. A reader's error is not caught here: it is a bug to see, not hide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class ActivePlan:
    """The active plan's config version, model, predictions and the pools it runs."""

    version: int
    model: str
    predicted: Mapping[str, Any]  # the plan's predicted figures (``bcr``, ``goodput_rps``, ...)
    predicted_bcr: float | None
    # ``{"site", "chip", "role", "instances", "tp"}`` per pool, or None when it has none.
    pools: tuple[dict[str, Any], ...] | None


@dataclass(frozen=True)
class AgentRow:
    """One registered agent as the dashboard lists it: health, the config it runs, and what
    tells a crash loop from a steady agent (its latest start, restarts, last heartbeat)."""

    name: str
    role: str
    site: str
    status: str
    config_version: int | None
    address: str = ""
    registered_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    restarts: int = 0
    # A gateway's count of records the control plane refused (heartbeat ``records_rejected``).
    records_rejected: int | None = None
    # Its rollout state and pool key (``pdd_core.agent.desired``); blank: not reported.
    state: str = ""
    pool: str = ""

    @property
    def healthy(self) -> bool:
        return self.status == "healthy"


ActivePlanReader = Callable[[], ActivePlan | None]
AgentsReader = Callable[[], Sequence[AgentRow]]
# The names of the gateway agents registered in one site.
GatewaysReader = Callable[[str], frozenset[str]]


@dataclass
class _Readers:
    active_plan: ActivePlanReader | None = None
    agents: AgentsReader | None = None
    gateways: GatewaysReader | None = None


_readers = _Readers()


def provide_active_plan(reader: ActivePlanReader) -> None:
    """Called once by the planning app: how to read the active plan."""
    _readers.active_plan = reader


def provide_agents(reader: AgentsReader, gateways: GatewaysReader) -> None:
    """Called once by the agents app: how to list the registered agents, and the gateways of
    a site."""
    _readers.agents = reader
    _readers.gateways = gateways


def active_plan() -> ActivePlan | None:
    """The active plan, or None (no plan activated, or no planning app)."""
    reader = _readers.active_plan
    return None if reader is None else reader()


def agents() -> list[dict[str, Any]] | None:
    """Registered agents as dicts of ``AgentRow``'s fields and ``healthy``, or None when the
    agents app is not installed."""
    reader = _readers.agents
    if reader is None:
        return None
    return [{**asdict(a), "healthy": a.healthy} for a in reader()]


def agents_up() -> int:
    """How many registered agents are healthy."""
    reader = _readers.agents
    return 0 if reader is None else sum(a.healthy for a in reader())


def site_gateways(site: str) -> frozenset[str]:
    """The names of the gateway agents registered in ``site`` (none without the agents app:
    then no agent token can report usage)."""
    reader = _readers.gateways
    return frozenset() if reader is None else reader(site)
