"""Agents authenticate each other: a per-plane shared secret proven in the HELLO handshake.

Anyone who can reach an agent's port must not be able to drive it (a rogue ``GENERATE`` would
get tokens with no API key and no record). Every process of a plane holds the same secret
(``pdd up`` makes a fresh one per plane, in a 0600 file whose path its children get in the
environment: it is never on a command line, so ``ps`` shows none). The handshake is two frames
and mutual, with HMAC-SHA256 over fresh nonces:

- the connecting side sends ``HELLO{role, agent_id, model, to_role, to_agent, nonce, ts,
  mac}`` with ``mac = HMAC(secret, "hello" | role | agent_id | to_role | to_agent | nonce |
  ts)``: the MAC names the listener it is meant for, its role and id;
- the listening side checks the MAC against its *own* role and id (constant-time), that ``ts``
  is within ``MAX_SKEW_S`` of its clock and that the nonce was not seen in that window (no
  replay), then answers ``HELLO_ACK{..., mac}`` with ``mac = HMAC(secret, "ack" | nonce | its
  agent_id)``, which the connecting side checks (and that the answer comes from the agent it
  meant), so it never talks to an impostor either.

Binding the listener matters because every agent of a plane holds the same secret and keeps
its own nonce cache: a HELLO captured on one connection would otherwise be accepted by every
other agent within the skew window. A nonce cache is per process, so within ``MAX_SKEW_S`` of
a restart the same agent could take a replay of a HELLO meant for it; TLS (``agent.tls``)
keeps HELLOs from being captured at all.

A HELLO that fails is refused with ``ERROR{code: unauthenticated}``, logged with the peer's
address, and the connection is closed before any other frame is read.

The plane's secret and the WAN line's control token are read the same way
(``secret_from_env``): from a 0600 file named by ``<NAME>_FILE`` (``pdd up`` writes fresh
ones per plane) or from the variable ``<NAME>`` itself (a Kubernetes Secret given as an
environment variable, which only the process's user and root can read).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import time
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pdd_core.errors import PddError

SECRET_ENV = "PDD_PLANE_SECRET_FILE"
PLANE_SECRET = "PDD_PLANE_SECRET"  # the secret itself (SECRET_ENV names a file holding it)
WAN_TOKEN = "PDD_WAN_TOKEN"  # the WAN line's control token (or a file: PDD_WAN_TOKEN_FILE)
MAX_SKEW_S = 60.0


class AuthError(PddError):
    """A handshake that does not prove the plane's secret."""


def new_secret_file(path: Path) -> Path:
    """Write a fresh random secret to ``path``, readable by its owner only (0600)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secrets.token_hex(32))
    os.chmod(path, 0o600)
    return path


def read_secret_file(path: Path | str, name: str = SECRET_ENV) -> bytes:
    """The secret in ``path``; ``AuthError`` if it is missing, empty or readable by others."""
    target = Path(path)
    try:
        mode = target.stat().st_mode
        text = target.read_text().strip()
    except OSError as exc:
        raise AuthError(f"{name}: cannot read {target}: {exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AuthError(f"{name}: {target} must be readable by its owner only (chmod 600)")
    if not text:
        raise AuthError(f"{name}: {target} is empty")
    return text.encode()


def secret_from_env(environ: Mapping[str, str] | None = None, name: str = PLANE_SECRET) -> bytes:
    """The secret ``name`` (the plane's by default): from the 0600 file ``<name>_FILE`` names,
    else from ``<name>`` itself; ``AuthError`` without either. There is no default: a secret
    nobody generated is one anybody can guess."""
    env = os.environ if environ is None else environ
    path = env.get(f"{name}_FILE", "")
    if path:
        return read_secret_file(path, f"{name}_FILE")
    value = env.get(name, "").strip()
    if value:
        return value.encode()
    raise AuthError(f"{name}_FILE: not set (the path of a 0600 file holding {name}), nor {name}")


def _mac(secret: bytes, *parts: object) -> str:
    message = "|".join(str(p) for p in parts).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


class PlaneAuth:
    """Signs and checks this process's handshakes with the plane's secret."""

    def __init__(self, secret: bytes, *, max_skew_s: float = MAX_SKEW_S) -> None:
        if not secret:
            raise AuthError("the plane secret is empty")
        self._secret = secret
        self._max_skew_s = max_skew_s
        self._seen: OrderedDict[str, float] = OrderedDict()

    def hello(self, body: Mapping[str, Any], *, to_role: str, to_agent: str) -> dict[str, Any]:
        """A HELLO body (``role``, ``agent_id``, ...) for the listener ``to_agent`` (of role
        ``to_role``), with a fresh nonce, time and MAC."""
        nonce, now = secrets.token_hex(16), time.time()
        sender = (body.get("role"), body.get("agent_id"))
        mac = _mac(self._secret, "hello", *sender, to_role, to_agent, nonce, now)
        return {**body, "to_role": to_role, "to_agent": to_agent, "nonce": nonce, "ts": now,
                "mac": mac}  # fmt: skip

    def check_hello(self, body: Mapping[str, Any], *, me: Mapping[str, Any]) -> None:
        """Accept a HELLO body meant for this listener (``me``: its ``role`` and ``agent_id``)
        or raise ``AuthError`` (bad MAC, meant for another agent, stale, replayed)."""
        nonce, stamp, mac = body.get("nonce"), body.get("ts"), body.get("mac")
        if not isinstance(nonce, str) or not isinstance(mac, str):
            raise AuthError("no proof of the plane secret")
        if isinstance(stamp, bool) or not isinstance(stamp, int | float):
            raise AuthError("no timestamp")
        sender, listener = (body.get("role"), body.get("agent_id")), (me["role"], me["agent_id"])
        expected = _mac(self._secret, "hello", *sender, *listener, nonce, stamp)
        if not hmac.compare_digest(expected, mac):
            meant = (body.get("to_role"), body.get("to_agent"))
            if meant != listener:
                raise AuthError(f"HELLO meant for another agent ({meant[1]!r}, {meant[0]!r})")
            raise AuthError("wrong proof of the plane secret")
        now = time.time()
        if abs(now - float(stamp)) > self._max_skew_s:
            raise AuthError("stale HELLO")
        while self._seen and next(iter(self._seen.values())) < now - 2 * self._max_skew_s:
            self._seen.popitem(last=False)
        if nonce in self._seen:
            raise AuthError("replayed HELLO")
        self._seen[nonce] = now

    def ack(self, body: Mapping[str, Any], hello: Mapping[str, Any]) -> dict[str, Any]:
        """The HELLO_ACK body answering ``hello``: proves this side holds the secret too."""
        return {**body, "mac": _mac(self._secret, "ack", hello.get("nonce"), body.get("agent_id"))}

    def check_ack(self, ack: Mapping[str, Any], hello: Mapping[str, Any]) -> None:
        """Accept the HELLO_ACK to our ``hello`` from the agent it was meant for, or raise
        ``AuthError``."""
        mac = ack.get("mac")
        expected = _mac(self._secret, "ack", hello.get("nonce"), ack.get("agent_id"))
        if not isinstance(mac, str) or not hmac.compare_digest(expected, mac):
            raise AuthError("the peer did not prove the plane secret")
        if ack.get("agent_id") != hello.get("to_agent"):
            raise AuthError(f"answered by {ack.get('agent_id')!r}, not {hello.get('to_agent')!r}")
