"""Scenario files (TOML): a deployment, its baseline, SLA, prices, routing and a workload.

A scenario is what ``pdd simulate`` and ``pdd compare`` run: the PDD topology (sites, links,
pools by catalog chip id), the baseline pools that ``same-dc`` and ``colocated`` run on, the
SLA, the price book, the routing table, engine settings, and the workload (a trace file or the
agentic generator's parameters). Every error names the offending key, e.g.
``pdd_reference.toml: [routing] transfer_budget_s: must be non-negative``. The README section
"Scenarios and simulation" documents every table.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from pdd_core.routing import RoutingTable
from pdd_core.sim import (
    DEFAULT_PRICES,
    Policy,
    RecordSink,
    SimConfig,
    SimResult,
    StreamResult,
    policy_topology,
    simulate,
    simulate_stream,
)
from pdd_core.sim.stream import DEFAULT_WINDOW_S
from pdd_core.specs import (
    SLA,
    PriceBook,
    RldMode,
    ShapeError,
    Topology,
    load_chips,
    load_models,
    topology_from_dict,
)
from pdd_core.workload import (
    AgenticWorkload,
    FixedWorkload,
    Request,
    SessionStream,
    generate_agentic,
    generate_fixed,
    read_trace,
    stream_agentic,
)

TOP_LEVEL = frozenset(
    {
        "scenario",
        "sites",
        "links",
        "pools",
        "baseline",
        "sla",
        "prices",
        "routing",
        "engine",
        "workload",
        "planner",
    }
)


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """A trace file (``trace``), agentic generator parameters (``generator``) or fixed-length
    benchmark requests (``fixed``), plus shaping.

    ``time_scale`` multiplies arrival times (0.5 doubles the rate); ``max_requests`` keeps the
    first N requests by arrival.
    """

    trace: Path | None = None
    generator: AgenticWorkload | None = None
    fixed: FixedWorkload | None = None
    seed: int = 0
    time_scale: float = 1.0
    max_requests: int | None = None

    @property
    def closed_loop_default(self) -> bool:
        """Whether this workload's sessions run closed loop unless ``[engine] closed_loop``
        says otherwise: generated agentic sessions do (an agent sends its next turn after the
        answer plus its tool/think time, ``AgenticWorkload.turn_gap_s``); a trace is replayed
        open loop, at its recorded arrival times (what Mooncake and Azure publish), and fixed
        benchmark requests have no sessions."""
        return self.trace is None and self.fixed is None

    def requests(self) -> list[Request]:
        if self.trace is not None:
            loaded = list(read_trace(self.trace).requests)
        elif self.fixed is not None:
            loaded = generate_fixed(self.fixed, seed=self.seed)
        else:
            loaded = generate_agentic(self.generator or AgenticWorkload(), seed=self.seed)
        loaded.sort(key=lambda r: r.arrival_s)
        if self.max_requests is not None:
            loaded = loaded[: self.max_requests]
        if self.time_scale != 1.0:
            loaded = [replace(r, arrival_s=r.arrival_s * self.time_scale) for r in loaded]
        return loaded

    def stream(self) -> SessionStream | list[Request]:
        """``requests()``, streamed where the workload allows: generated agentic sessions come
        as a ``SessionStream`` holding only the sessions under way (not with ``max_requests``,
        whose cut would split sessions); traces and fixed requests come as their list."""
        if self.trace is not None or self.fixed is not None or self.max_requests is not None:
            return self.requests()
        stream = stream_agentic(self.generator or AgenticWorkload(), seed=self.seed)
        return stream.shaped(self.time_scale)


@dataclass(frozen=True, slots=True)
class Scenario:
    """A loaded, validated scenario file."""

    name: str
    description: str
    model_id: str
    pdd: Topology
    baseline: Topology
    sla: SLA
    prices: PriceBook
    table: RoutingTable
    config: SimConfig
    workload: WorkloadSpec
    # The raw ``[planner]`` table (candidate chips and limits); ``pdd_core.planner`` reads it.
    planner: Mapping[str, Any] = field(default_factory=dict)

    def topology_for(self, policy: Policy | str) -> Topology:
        return policy_topology(policy, self.pdd, self.baseline)

    def run(
        self,
        policy: Policy | str,
        requests: list[Request],
        *,
        config: SimConfig | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> SimResult:
        """Simulate ``policy`` on its topology with this scenario's settings."""
        return simulate(
            self.topology_for(policy),
            policy,
            requests,
            config=config or self.config,
            progress=progress,
            **self._settings(),
        )

    def run_stream(
        self,
        policy: Policy | str,
        requests: Iterable[Request],
        *,
        progress: Callable[[int], None] | None = None,
        window_s: float = DEFAULT_WINDOW_S,
        records: RecordSink | None = None,
    ) -> StreamResult:
        """``run`` for a long workload (``WorkloadSpec.stream``): records are folded as they
        come (``pdd_core.sim.simulate_stream``), and passed to ``records`` when given."""
        return simulate_stream(
            self.topology_for(policy),
            policy,
            requests,
            config=self.config,
            progress=progress,
            window_s=window_s,
            records=records,
            **self._settings(),
        )

    def _settings(self) -> dict[str, Any]:
        """What every run of this scenario passes the simulator, whatever the policy."""
        return {"model_id": self.model_id, "sla": self.sla, "table": self.table,
                "prices": self.prices}  # fmt: skip


def load_scenario(path: Path | str, *, trace: Path | str | None = None) -> Scenario:
    """Read and validate a scenario file; ``trace`` overrides its workload with a trace file."""
    path = Path(path)
    raw = read_toml(path)
    try:
        return scenario_from_dict(raw, base_dir=path.parent, trace=trace)
    except ShapeError as exc:
        raise ShapeError(exc.rule, f"{path.name}: {exc.detail}") from None
    except ValueError as exc:
        raise ValueError(f"{path.name}: {exc}") from None


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's tables; a syntax error names the file."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path.name}: not valid TOML ({exc})") from None


def scenario_from_dict(
    raw: Mapping[str, Any], *, base_dir: Path = Path("."), trace: Path | str | None = None
) -> Scenario:
    """Build a ``Scenario`` from parsed TOML (see the module docstring for the tables)."""
    no_unknown_keys("", raw, TOP_LEVEL)
    head = table_of(raw, "scenario")
    no_unknown_keys(
        "scenario", head, frozenset({"name", "description", "model", "seed", "rld_mode"})
    )
    model_id = head.get("model")
    models = load_models()
    if model_id not in models:
        raise ValueError(f"[scenario] model: unknown catalog model {model_id!r}")
    chips = load_chips()
    sites = raw.get("sites", [])
    links = raw.get("links", [])
    baseline_raw = table_of(raw, "baseline")
    no_unknown_keys("baseline", baseline_raw, frozenset({"pools"}))
    baseline = _topology(
        "baseline.pools",
        sites,
        links,
        baseline_raw.get("pools", []),
        model_id=model_id,
        chips=chips,
        models=models,
    )
    # A scenario of one site has no PDD deployment to run: its pools default to the baseline's
    # (``pdd`` and ``naive-cross-dc`` then refuse to run, naming the missing second site).
    pdd = baseline
    if "pools" in raw:
        pdd = _topology(
            "pools", sites, links, raw["pools"], model_id=model_id, chips=chips, models=models
        )
    try:
        pdd = replace(pdd, rld_mode=RldMode(head.get("rld_mode", RldMode.POOL)))
    except ValueError:
        raise ValueError(
            f"[scenario] rld_mode: must be pool or shared-with-prefill, got {head['rld_mode']!r}"
        ) from None
    seed = head.get("seed", 0)
    workload = _workload(table_of(raw, "workload"), base_dir, trace, seed)
    return Scenario(
        name=str(head.get("name", "")),
        description=str(head.get("description", "")),
        model_id=str(model_id),
        pdd=pdd,
        baseline=baseline,
        sla=build_table("sla", SLA, table_of(raw, "sla")),
        prices=build_table("prices", PriceBook, table_of(raw, "prices"), DEFAULT_PRICES),
        table=build_table("routing", RoutingTable, table_of(raw, "routing")),
        config=engine_config(raw, closed_loop_default=workload.closed_loop_default),
        workload=workload,
        planner=dict(table_of(raw, "planner")),
    )


def _workload(
    raw: Mapping[str, Any], base_dir: Path, trace: Path | str | None, seed: int
) -> WorkloadSpec:
    no_unknown_keys(
        "workload",
        raw,
        frozenset({"trace", "generator", "fixed", "seed", "time_scale", "max_requests"}),
    )
    if "fixed" in raw and ("generator" in raw or "trace" in raw):
        raise ValueError("[workload] fixed: give a trace, a generator or fixed requests, not two")
    if trace is not None:
        trace_path: Path | None = Path(trace)
    elif "trace" in raw:
        trace_path = base_dir / str(raw["trace"])
    else:
        trace_path = None
    if trace_path is not None and not trace_path.exists():
        raise ValueError(f"[workload] trace: no such file {trace_path}")
    generator = fixed = None
    if trace_path is None and "fixed" in raw:
        table = raw["fixed"]
        if not isinstance(table, Mapping):
            raise ValueError("[workload.fixed] must be a table")
        fixed = build_table("workload.fixed", FixedWorkload, table)
    elif trace_path is None:
        gen = raw.get("generator", {})
        if not isinstance(gen, Mapping):
            raise ValueError("[workload.generator] must be a table")
        generator = build_table("workload.generator", AgenticWorkload, gen)
    scale = raw.get("time_scale", 1.0)
    if not isinstance(scale, int | float) or scale <= 0:
        raise ValueError(f"[workload] time_scale: must be positive, got {scale!r}")
    limit = raw.get("max_requests")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"[workload] max_requests: must be a positive integer, got {limit!r}")
    return WorkloadSpec(
        trace=trace_path,
        generator=generator,
        fixed=fixed,
        seed=int(raw.get("seed", seed)),
        time_scale=float(scale),
        max_requests=limit,
    )


def _topology(
    key: str,
    sites: Any,
    links: Any,
    pools: Any,
    *,
    model_id: Any,
    chips: Mapping[str, Any],
    models: Mapping[str, Any],
) -> Topology:
    if not isinstance(pools, list) or not pools:
        raise ValueError(f"[[{key}]]: at least one pool is required")
    filled = []
    for index, pool in enumerate(pools):
        if not isinstance(pool, Mapping):
            raise ValueError(f"[[{key}]] #{index + 1}: must be a table")
        no_unknown_keys(
            f"{key} #{index + 1}",
            pool,
            frozenset(
                {
                    "name",
                    "site",
                    "chip",
                    "role",
                    "instances",
                    "tp",
                    "pp",
                    "dp",
                    "ep",
                    "chunk_tokens",
                    "model",
                }
            ),
        )
        if pool.get("chip") not in chips:
            raise ValueError(
                f"[[{key}]] #{index + 1} chip: unknown catalog chip {pool.get('chip')!r}"
            )
        filled.append({"model": model_id, **pool})
    try:
        topology = topology_from_dict(
            {"sites": sites, "links": links, "pools": filled}, chips, models
        )
    except ValueError as exc:
        raise ValueError(f"[[{key}]] / [[sites]] / [[links]]: {exc}") from None
    try:
        topology.check_shapes()
    except ShapeError as exc:
        raise ShapeError(exc.rule, f"[[{key}]] {exc.detail}") from None
    return topology


def engine_config(raw: Mapping[str, Any], *, closed_loop_default: bool | None = None) -> SimConfig:
    """The ``[engine]`` table of a parsed scenario as a ``SimConfig`` (its seed defaults to the
    scenario's): what a plan computed for it assumed of each engine (chunk budget, max batch).

    ``closed_loop`` defaults to ``closed_loop_default``, or when that is None to the scenario's
    own workload (``WorkloadSpec.closed_loop_default``: generated sessions closed loop, a trace
    or fixed requests open loop)."""
    engine = dict(table_of(raw, "engine"))
    engine.setdefault("seed", table_of(raw, "scenario").get("seed", 0))
    if closed_loop_default is None:
        workload = table_of(raw, "workload")
        closed_loop_default = "trace" not in workload and "fixed" not in workload
    engine.setdefault("closed_loop", closed_loop_default)
    built: SimConfig = build_table("engine", SimConfig, engine)
    return built


def table_of(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, Mapping):
        raise ValueError(f"[{key}] must be a table")
    return value


def no_unknown_keys(section: str, raw: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(set(raw) - known)
    if unknown:
        where = f"[{section}] " if section else ""
        raise ValueError(f"{where}unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")


def build_table(section: str, cls: type[Any], raw: Mapping[str, Any], default: Any = None) -> Any:
    if not raw and default is not None:
        return default
    no_unknown_keys(section, raw, frozenset(f.name for f in fields(cls)))
    try:
        return cls(**raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"[{section}] {exc}") from None
