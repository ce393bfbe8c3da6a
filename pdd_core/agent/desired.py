"""A site's desired state: the pools its reconciler must run, and how an agent reports its part.

One home for what the control plane answers at ``GET /api/v1/sites/{slug}/desired/`` and what a
site's reconciler (``pdd up``'s supervisor, or the Kubernetes workloads the control plane
renders) reads from it: ``DesiredState`` builds and validates that document both ways, so the two
sides cannot disagree on a field.

- A pool is one (role, chip, instance shape) of the active plan in one site; its ``key``
  (``pool_key``, e.g. ``prefill/h800/tp4xpp4``) is stable across plans, so a reconciler matches
  running instances to desired ones by key. Roles are ``ProcessRole`` values (prefill, relay,
  main); gateways and the WAN emulator are not pools.
- ``instances`` comes from the plan (``source`` "plan") or from an operator's override of that
  one pool (``source`` "override").
- No active plan (``version`` 0) gives no pools, which means "keep what you run".
- An active plan whose design this plane's agents cannot run (an aggregated one: its instances
  prefill and decode in one process, and the agents run disaggregated roles only) is not enacted:
  ``enacted`` false, a ``reason`` (``not_enacted_reason``), no pools, so every site keeps what it
  runs while the plan's version and routing table still take effect.
- Each agent reports its rollout state (``RolloutState``) and its pool key on every heartbeat.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pdd_core.agent.config import ProcessRole
from pdd_core.errors import PddError
from pdd_core.specs import InstanceShape, Role


class RolloutState(StrEnum):
    """Where one agent is in a rollout: starting (not yet routed to), serving, draining (no new
    request is routed to it; in-flight ones finish) and stopped."""

    STARTING = "starting"
    SERVING = "serving"
    DRAINING = "draining"
    STOPPED = "stopped"


class PoolSource(StrEnum):
    """Where a pool's instance count came from."""

    PLAN = "plan"
    OVERRIDE = "override"


# The planner's roles (``specs.Role``) as the processes that run them.
PROCESS_ROLE_OF: Mapping[Role, ProcessRole] = {
    Role.PREFILL: ProcessRole.PREFILL,
    Role.RELAY_DECODE: ProcessRole.RELAY,
    Role.MAIN_DECODE: ProcessRole.MAIN,
}
POOL_ROLES = frozenset(PROCESS_ROLE_OF.values())

# role/chip/shape: the shape's label is ``InstanceShape.label()`` (tp4, tp8xpp4, tp2xdp2xep2).
_KEY = re.compile(
    r"^(prefill|relay|main)/[A-Za-z0-9][A-Za-z0-9._-]{0,63}/tp[0-9]+(?:xpp[0-9]+)?(?:xdp[0-9]+)?"
    r"(?:xep[0-9]+)?$"
)
MAX_INSTANCES = 1024
MAX_REASON = 500
# The design families (a plan result's ``policy``, ``pdd_core.planner.design.FAMILIES``) this
# plane's agents cannot run, as the pages name them: an agent runs one disaggregated role.
UNENACTED_FAMILIES: Mapping[str, str] = {
    "colocated": "an aggregated design (colocated: each instance prefills and decodes)",
}
AGENT_ROLES = "this plane's agents run disaggregated roles only (prefill, relay, main)"
MAX_SHAPE = 1024
MAX_POOL_KEY = 100


class DesiredStateError(PddError, ValueError):
    """A desired-state document (or a pool key) is malformed; the message names the field."""


def pool_key(role: str, chip: str, shape: InstanceShape) -> str:
    """The stable key of a pool: ``<process role>/<chip>/<shape label>``."""
    return f"{ProcessRole(role).value}/{chip}/{shape.label()}"


def not_enacted_reason(policy: object) -> str | None:
    """Why this plane cannot enact a plan of design family ``policy`` (its result's
    ``policy``), e.g. "an aggregated design (...); this plane's agents run disaggregated roles
    only (...)"; None when it can."""
    what = UNENACTED_FAMILIES.get(str(policy))
    return None if what is None else f"{what}; {AGENT_ROLES}"


def check_pool_key(key: str) -> str:
    """``key`` when it has a pool key's form; else ``DesiredStateError`` saying which form."""
    if not isinstance(key, str) or len(key) > MAX_POOL_KEY or not _KEY.match(key):
        raise DesiredStateError(
            f"not a pool key: {key!r} (expected <prefill|relay|main>/<chip>/<shape>, "
            "e.g. prefill/h800/tp4xpp4)"
        )
    return key


def _int(raw: Mapping[str, Any], name: str, where: str, *, low: int, high: int) -> int:
    value = raw.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DesiredStateError(f"{where}.{name}: an integer in [{low}, {high}], got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class DesiredPool:
    """One pool a site must run: ``instances`` instances of ``chip`` at shape tp x pp x dp x ep,
    in ``role``, with the plan's engine settings for it (``chunk_tokens``, ``max_batch``)."""

    role: ProcessRole
    chip: str
    instances: int
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    engine: Mapping[str, Any] = field(default_factory=dict)
    source: PoolSource = PoolSource.PLAN

    def __post_init__(self) -> None:
        if self.role not in POOL_ROLES:
            raise DesiredStateError(f"role: one of prefill, relay, main, got {str(self.role)!r}")
        if not 0 <= self.instances <= MAX_INSTANCES:
            raise DesiredStateError(f"instances: in [0, {MAX_INSTANCES}], got {self.instances}")
        try:
            check_pool_key(self.key)
        except DesiredStateError as exc:
            raise DesiredStateError(f"chip: {self.chip!r} is not a chip id ({exc})") from None

    @property
    def key(self) -> str:
        return pool_key(self.role, self.chip, self.shape)

    @property
    def shape(self) -> InstanceShape:
        return InstanceShape(tp=self.tp, pp=self.pp, dp=self.dp, ep=self.ep)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "role": self.role.value,
            "chip": self.chip,
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "ep": self.ep,
            "instances": self.instances,
            "engine": dict(self.engine),
            "source": self.source.value,
        }

    @classmethod
    def from_dict(cls, raw: Any, where: str = "pool") -> DesiredPool:
        if not isinstance(raw, Mapping):
            raise DesiredStateError(f"{where}: an object, got {type(raw).__name__}")
        role = raw.get("role")
        if role not in {r.value for r in POOL_ROLES}:
            raise DesiredStateError(f"{where}.role: one of prefill, relay, main, got {role!r}")
        source = raw.get("source", PoolSource.PLAN.value)
        if source not in {s.value for s in PoolSource}:
            raise DesiredStateError(f"{where}.source: plan or override, got {source!r}")
        chip = raw.get("chip")
        if not isinstance(chip, str) or not chip:
            raise DesiredStateError(f"{where}.chip: a chip id, got {chip!r}")
        engine = raw.get("engine", {})
        if not isinstance(engine, Mapping):
            raise DesiredStateError(f"{where}.engine: an object, got {type(engine).__name__}")
        try:
            pool = cls(
                role=ProcessRole(role),
                chip=chip,
                instances=_int(raw, "instances", where, low=0, high=MAX_INSTANCES),
                tp=_int(raw, "tp", where, low=1, high=MAX_SHAPE),
                pp=_int(raw, "pp", where, low=1, high=MAX_SHAPE),
                dp=_int(raw, "dp", where, low=1, high=MAX_SHAPE),
                ep=_int(raw, "ep", where, low=1, high=MAX_SHAPE),
                engine=dict(engine),
                source=PoolSource(source),
            )
        except DesiredStateError as exc:
            raise DesiredStateError(f"{where}.{exc}") from None
        if "key" in raw and raw["key"] != pool.key:
            raise DesiredStateError(f"{where}.key: {raw['key']!r} is not its shape's {pool.key!r}")
        return pool


@dataclass(frozen=True, slots=True)
class DesiredState:
    """What one site must run under config ``version`` (0: no plan active, keep what you run);
    ``drain_timeout_s`` bounds how long a surplus instance drains before it is stopped.
    ``enacted`` false (with its ``reason``, and no pools) says the active plan's pools are not
    for this plane: keep what you run."""

    site: str
    version: int
    plan: int | None
    drain_timeout_s: float
    pools: tuple[DesiredPool, ...] = ()
    enacted: bool = True
    reason: str = ""

    def __post_init__(self) -> None:
        if not math.isfinite(self.drain_timeout_s) or self.drain_timeout_s < 0:
            raise DesiredStateError(f"drain_timeout_s: >= 0, got {self.drain_timeout_s!r}")
        if self.enacted and self.reason:
            raise DesiredStateError("reason: only a plan that is not enacted has one")
        if not self.enacted and (not self.reason or self.pools):
            raise DesiredStateError(
                "enacted: false needs a reason and no pools (keep what you run), got "
                f"reason {self.reason!r} and {len(self.pools)} pools"
            )
        keys = [p.key for p in self.pools]
        if len(set(keys)) != len(keys):
            raise DesiredStateError(f"pools: a key appears twice in {keys}")

    def pool(self, key: str) -> DesiredPool | None:
        return next((p for p in self.pools if p.key == key), None)

    def instances(self) -> dict[str, int]:
        """``{pool key: desired instances}``."""
        return {p.key: p.instances for p in self.pools}

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "version": self.version,
            "plan": self.plan,
            "drain_timeout_s": self.drain_timeout_s,
            "enacted": self.enacted,
            "reason": self.reason,
            "pools": [p.to_dict() for p in self.pools],
        }

    @classmethod
    def from_dict(cls, raw: Any) -> DesiredState:
        """Parse (and validate) the control plane's answer."""
        if not isinstance(raw, Mapping):
            raise DesiredStateError(f"desired state: an object, got {type(raw).__name__}")
        site = raw.get("site")
        if not isinstance(site, str) or not site:
            raise DesiredStateError(f"site: a site slug, got {site!r}")
        version = _int(raw, "version", "desired", low=0, high=2**31 - 1)
        plan = raw.get("plan")
        if plan is not None and (isinstance(plan, bool) or not isinstance(plan, int)):
            raise DesiredStateError(f"plan: an id or null, got {plan!r}")
        timeout = raw.get("drain_timeout_s")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise DesiredStateError(f"drain_timeout_s: a number, got {timeout!r}")
        pools = raw.get("pools")
        if not isinstance(pools, list):
            raise DesiredStateError(f"pools: a list, got {type(pools).__name__}")
        enacted = raw.get("enacted", True)  # absent from an older control plane's answer
        if not isinstance(enacted, bool):
            raise DesiredStateError(f"enacted: true or false, got {enacted!r}")
        reason = raw.get("reason", "")
        if not isinstance(reason, str) or len(reason) > MAX_REASON:
            raise DesiredStateError(f"reason: a string of at most {MAX_REASON} characters")
        return cls(
            site=site,
            version=version,
            plan=plan,
            drain_timeout_s=float(timeout),
            pools=tuple(DesiredPool.from_dict(p, f"pools[{i}]") for i, p in enumerate(pools)),
            enacted=enacted,
            reason=reason,
        )
