"""The data plane's configuration file: agents, sites, the WAN line, engines, tenants, routing.

One JSON file describes a whole data plane (a control plane, when joined, may replace its
routing table and tenant keys at run time: ``Gateway.apply_control_config``), and every process
reads the same file: ``pdd up`` writes a copy with the free ports it picked, and each
``pdd agent --role ROLE --id ID`` finds its own address and its peers' in it.
A peer in another site is reached through the WAN emulator's route for it, so the cross-site
hop is always shaped. Malformed values fail at start with the field named.

API keys appear only as SHA-256 hex digests of the whole key (``pdd_core.keys.hash_key``, which
the control plane's accounts app uses too), so a config file can be committed without secrets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from pdd_core.errors import PddError
from pdd_core.routing import RoutingTable
from pdd_core.specs import SLA, InstanceShape, ShapeError, check_shape, load_chips, load_models
from pdd_core.transfer import IW10_BYTES


class ProcessRole(StrEnum):
    """Every data-plane process ``pdd agent --role`` starts: a configured agent (``ROLES``; the
    prefill, relay and main agents run ``specs.Role`` P, RLD and MD) or the WAN link emulator.
    The control plane's agent registry stores these values."""

    GATEWAY = "gateway"
    PREFILL = "prefill"
    RELAY = "relay"
    MAIN = "main"
    WAN = "wan"


ROLES = tuple(r.value for r in ProcessRole if r is not ProcessRole.WAN)


class ConfigError(PddError, ValueError):
    """The configuration file is malformed; the message names the field."""


# What a reconciler (``pdd up``'s supervisor) says of an agent in the file: ``starting`` until
# its process is ready (no gateway connects to it yet), ``serving``, ``draining`` (no new
# request is routed to it; it finishes what it holds) and ``stopped`` (its process is gone; it
# stays in the file so that requests naming it still resolve its address, and fail over as
# for any lost agent).
AGENT_STATES = ("starting", "serving", "draining", "stopped")


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One agent process: its id, role, site and listening address (port 0 = pick one), and
    what the site's reconciler says of it: its rollout ``state`` and the desired ``pool`` (key)
    it serves (empty: started from the topology, no plan has claimed it yet)."""

    id: str
    role: str
    site: str
    host: str = "127.0.0.1"
    port: int = 0
    state: str = "serving"
    pool: str = ""

    @property
    def routable(self) -> bool:
        """Whether a gateway may route a new request to it (a draining agent only finishes)."""
        return self.state == "serving"


@dataclass(frozen=True, slots=True)
class WanSpec:
    """The emulated line between the sites; ``routes`` maps a remote agent id to its port.

    Its control endpoint's token is no part of the file: it is a secret of the plane
    (``PDD_WAN_TOKEN_FILE`` or ``PDD_WAN_TOKEN``, which ``pdd up`` generates per plane), and
    there is no default. ``initial_window_bytes`` is the TCP window a connection across it
    starts from (``agent.wan.link``) in real bytes (the line scales it by the engine's
    ``payload_scale``, as the KV it carries), RFC 6928's by default as in the simulator; 0 keeps
    every connection warm. ``bandwidth_gbps`` is the emulated wire's, in its own bytes."""

    bandwidth_gbps: float = 1.0
    rtt_ms: float = 10.0
    jitter_ms: float = 0.0
    initial_window_bytes: float = IW10_BYTES
    seed: int = 1
    host: str = "127.0.0.1"
    control_port: int = 0
    routes: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        window = self.initial_window_bytes
        if isinstance(window, bool) or not isinstance(window, int | float) or not window >= 0:
            raise ValueError(f"initial_window_bytes: must be a number >= 0, got {window!r}")


@dataclass(frozen=True, slots=True)
class TlsSpec:
    """TLS on the plane's connections (``agent.tls``): always across sites, and by default
    inside a site too; ``within_sites: false`` leaves plain the listeners that only agents of
    their own site reach (in the shipped topologies P and RLD: the KV to the relay crosses
    the site's own fabric), never one that another site reaches."""

    within_sites: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.within_sites, bool):
            raise ValueError(f"within_sites: must be true or false, got {self.within_sites!r}")


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """Which engine every agent runs: ``tiny`` (real numpy model), ``timed`` (roofline-paced)
    or ``llamacpp`` (a GGUF model on llama.cpp).

    For ``timed``, ``chips`` names the chip of each role (P and RLD in site A, MD in site B)
    and ``tp x pp x dp`` (``ep`` for MoE) is every instance's shape, checked against
    ``specs.shape``'s rules for each role's chip when the file is read.
    For ``llamacpp``, ``llamacpp`` holds the GGUF path and context settings
    (``pdd_core.engine.llamacpp_config``).
    """

    kind: str = "tiny"
    model: str = "tiny-test"
    chips: Mapping[str, str] = field(default_factory=dict)
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    time_scale: float = 1.0
    payload_scale: float = 1.0
    block_size: int = 16
    decode_step_s: float = 0.0  # floor on a decode step's seconds (paces the tiny model)
    prefill_s: float = 0.0  # floor on a prefill pass's seconds (the same, for prefill)
    vllm: Mapping[str, Any] = field(default_factory=dict)  # kind vllm: engine.vllm.config
    llamacpp: Mapping[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> InstanceShape:
        """Every instance's ``specs.shape.InstanceShape`` (the timed engine times passes on it)."""
        return InstanceShape(tp=self.tp, pp=self.pp, dp=self.dp, ep=self.ep)


@dataclass(frozen=True, slots=True)
class Limits:
    """Batch sizes, cache capacities and every timeout of the data plane."""

    request_timeout_s: float = 60.0
    idle_timeout_s: float = 15.0
    connect_timeout_s: float = 3.0
    prefill_batch: int = 8
    decode_batch: int = 32
    relay_batch: int = 16
    p_cache_tokens: int = 1_000_000
    drc_tokens: int = 1_000_000
    max_prompt_tokens: int = 0  # 0: the model's context window (catalog max_context)
    default_max_tokens: int = 16


# The journal's disk budget rides out a 10-minute control-plane outage at 100 req/s without
# loss: a gateway record is about 630 bytes of JSON (1 KiB allowed), and a rotation may delete
# the older half of the budget, so each half holds the whole outage: 2 x 600 s x 100 x 1 KiB.
JOURNAL_DEFAULT_BYTES = 2 * 600 * 100 * 1024


@dataclass(frozen=True, slots=True)
class DataPlaneConfig:
    """Everything a data-plane process needs; one instance per file, shared by all agents."""

    model: str
    engine: EngineSpec
    routing: RoutingTable
    sla: SLA
    wan: WanSpec
    limits: Limits
    tenants: Mapping[str, str]  # key sha256 -> tenant id
    agents: tuple[AgentSpec, ...]
    journal_dir: str = "var/journal"
    journal_max_bytes: int = JOURNAL_DEFAULT_BYTES
    allow_route_override: bool = False
    prefill_s_per_token: float = 0.0  # tiny engine's predicted prefill cost per miss token
    path: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)
    tls: TlsSpec = field(default_factory=TlsSpec)
    # The plane's shared secret (``agent.auth``): from the environment at start, never in
    # the file and never printed; and the directory of the plane's TLS material
    # (``PDD_TLS_DIR``: its CA, this agent's certificate and key).
    plane_secret: bytes = field(default=b"", repr=False)
    tls_dir: str = ""

    @property
    def wan_window_wire_bytes(self) -> float:
        """The WAN's TCP initial window in the wire's bytes, the line's and ``predict``'s unit:
        a timed engine ships KV at ``payload_scale`` of its size, over a line of that scale
        (the other engines ship their KV whole)."""
        scale = self.engine.payload_scale if self.engine.kind == "timed" else 1.0
        return self.wan.initial_window_bytes * scale

    def agent(self, agent_id: str) -> AgentSpec:
        for spec in self.agents:
            if spec.id == agent_id:
                return spec
        raise ConfigError(f"agents: no agent with id {agent_id!r}")

    def of_role(self, role: str) -> list[AgentSpec]:
        return [a for a in self.agents if a.role == role]

    def address_of(self, agent_id: str, from_site: str) -> tuple[str, int]:
        """Where ``from_site`` reaches ``agent_id``: directly in its site, else over the WAN."""
        target = self.agent(agent_id)
        if target.site != from_site:
            if agent_id not in self.wan.routes:
                raise ConfigError(f"wan.routes: no route to {agent_id!r} from {from_site!r}")
            return self.wan.host, int(self.wan.routes[agent_id])
        return target.host, target.port

    def with_ports(
        self, ports: Mapping[str, int], wan_routes: Mapping[str, int]
    ) -> DataPlaneConfig:
        agents = tuple(replace(a, port=ports.get(a.id, a.port)) for a in self.agents)
        wan = replace(
            self.wan,
            routes=dict(wan_routes),
            control_port=ports.get("wan-control", self.wan.control_port),
        )
        return replace(self, agents=agents, wan=wan)

    def to_dict(self) -> dict[str, Any]:
        """The file form, with the resolved ports (what ``pdd up`` hands its children)."""
        raw = dict(self.raw)
        raw["agents"] = [
            {"id": a.id, "role": a.role, "site": a.site, "host": a.host, "port": a.port,
             "state": a.state, "pool": a.pool}
            for a in self.agents
        ]  # fmt: skip
        wan = dict(raw.get("wan", {}))
        wan["routes"] = dict(self.wan.routes)
        wan["control_port"] = self.wan.control_port
        raw["wan"] = wan
        raw["tenants"] = [
            {"id": tenant, "key_sha256": [k for k, t in self.tenants.items() if t == tenant]}
            for tenant in sorted(set(self.tenants.values()))
        ]
        raw["journal"] = {"dir": self.journal_dir, "max_bytes": self.journal_max_bytes}
        return raw


def _section(raw: Mapping[str, Any], name: str, cls: type[Any]) -> Any:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: must be an object")
    try:
        return cls(**value)
    except TypeError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def config_from_dict(raw: Mapping[str, Any], path: str = "") -> DataPlaneConfig:
    """Parse and validate a configuration object; ``ConfigError`` names the first bad field."""
    agents: list[AgentSpec] = []
    for position, item in enumerate(raw.get("agents", [])):
        try:
            spec = AgentSpec(**item)
        except TypeError as exc:
            raise ConfigError(f"agents[{position}]: {exc}") from None
        if spec.role not in ROLES:
            raise ConfigError(f"agents[{position}].role: must be one of {', '.join(ROLES)}")
        if spec.state not in AGENT_STATES:
            raise ConfigError(f"agents[{position}].state: must be one of {', '.join(AGENT_STATES)}")
        agents.append(spec)
    ids = [a.id for a in agents]
    if len(set(ids)) != len(ids):
        raise ConfigError("agents: ids must be unique")
    # A plan may run without a relay pool (P-MD only) or without MD (P-RLD only): a plane needs
    # its gateway, a prefill and one decode stage.
    for role in ("gateway", "prefill"):
        if not any(a.role == role for a in agents):
            raise ConfigError(f"agents: need at least one {role} agent")
    if not any(a.role in ("relay", "main") for a in agents):
        raise ConfigError("agents: need at least one relay or main agent")
    tenants: dict[str, str] = {}
    for position, item in enumerate(raw.get("tenants", [])):
        tenant = item.get("id") if isinstance(item, dict) else None
        keys = item.get("key_sha256", []) if isinstance(item, dict) else None
        if not isinstance(tenant, str) or not isinstance(keys, list):
            raise ConfigError(f"tenants[{position}]: needs id and a key_sha256 list")
        for key in keys:
            if not isinstance(key, str) or len(key) != 64:
                raise ConfigError(f"tenants[{position}].key_sha256: a 64-hex-digit digest")
            tenants[key.lower()] = tenant
    wan_raw = dict(raw.get("wan", {}))
    if "control_token" in wan_raw:
        raise ConfigError(
            "wan.control_token: a token in the file is a token anybody can read; remove it "
            "(pdd up makes one per plane; otherwise set PDD_WAN_TOKEN_FILE or PDD_WAN_TOKEN)"
        )
    wan_raw["routes"] = {str(k): int(v) for k, v in dict(wan_raw.get("routes", {})).items()}
    journal = raw.get("journal", {})
    engine = _section(raw, "engine", EngineSpec)
    if engine.kind not in ("tiny", "timed", "vllm", "llamacpp"):
        raise ConfigError("engine.kind: must be tiny, timed, vllm or llamacpp")
    if engine.kind == "timed":
        _check_timed_shape(engine, agents)
    if engine.kind == "vllm":
        _check_vllm(engine, agents)
    if engine.kind == "llamacpp":
        from pdd_core.engine.llamacpp_config import settings_from_mapping

        try:
            settings_from_mapping(engine.llamacpp)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"engine.llamacpp.{exc}") from None
    return DataPlaneConfig(
        model=str(raw.get("model", engine.model)),
        engine=engine,
        routing=_section(raw, "routing", RoutingTable),
        sla=_section(raw, "sla", SLA),
        wan=_section({"wan": wan_raw}, "wan", WanSpec),
        limits=_section(raw, "limits", Limits),
        tenants=tenants,
        agents=tuple(agents),
        tls=_section(raw, "tls", TlsSpec),
        journal_dir=str(journal.get("dir", "var/journal")),
        journal_max_bytes=int(journal.get("max_bytes", JOURNAL_DEFAULT_BYTES)),
        allow_route_override=bool(raw.get("allow_route_override", False)),
        prefill_s_per_token=float(raw.get("prefill_s_per_token", 0.0)),
        path=path,
        raw=dict(raw),
    )


def _check_timed_shape(engine: EngineSpec, agents: list[AgentSpec]) -> None:
    """The timed engine's shape must be a valid instance of the model on every role's chip
    (``specs.shape.check_shape``: TP within the scale-up domain and dividing the heads, the
    weights fitting HBM, ...); the error names the role, the chip and the rule."""
    models, chips = load_models(), load_chips()
    if engine.model not in models:
        raise ConfigError(f"engine.model: {engine.model!r} is not in the model catalog")
    try:
        shape = engine.shape
    except ShapeError as exc:
        raise ConfigError(f"engine: {exc}") from None
    default = next(iter(engine.chips.values()), "h800")
    for role in sorted({a.role for a in agents if a.role != "gateway"}):
        chip = engine.chips.get(role, default)
        if chip not in chips:
            raise ConfigError(f"engine.chips.{role}: {chip!r} is not in the chip catalog")
        try:
            check_shape(models[engine.model], chips[chip], shape)
        except ShapeError as exc:
            raise ConfigError(
                f"engine: {role} on {chip}: {shape.label()} is not a valid instance of "
                f"{engine.model}: {exc.detail} [rule {exc.rule}]"
            ) from None


def _check_vllm(engine: EngineSpec, agents: list[AgentSpec]) -> None:
    """Every model-serving agent's vLLM settings must parse (``engine.vllm.config``)."""
    from pdd_core.engine.vllm.config import VLLMConfigError, instance_for

    for agent in agents:
        if agent.role != "gateway":
            try:
                instance_for(engine.vllm, agent.role, agent.id, engine.block_size)
            except VLLMConfigError as exc:
                raise ConfigError(str(exc)) from None


def load_config(path: Path | str) -> DataPlaneConfig:
    """Read a configuration file (JSON)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must hold a JSON object")
    return config_from_dict(raw, str(path))
