"""Agents authenticate each other: a per-plane shared secret proven in the HELLO handshake.

Anyone who can reach an agent's port must not be able to drive it (a rogue ``GENERATE`` would
get tokens with no API key and no record). Every process of a plane holds the same secret
(``pdd up`` makes a fresh one per plane, in a 0600 file whose path its children get in the
environment: it is never on a command line, so ``ps`` shows none). The handshake is two frames
and mutual, with HMAC-SHA256 over fresh nonces:

- the connecting side sends ``HELLO{role, agent_id, model, nonce, ts, mac}`` with
  ``mac = HMAC(secret, "hello" | role | agent_id | nonce | ts)``;
- the listening side checks the MAC (constant-time), that ``ts`` is within
  ``MAX_SKEW_S`` of its clock and that the nonce was not seen in that window (no replay), then
  answers ``HELLO_ACK{..., mac}`` with ``mac = HMAC(secret, "ack" | nonce | its agent_id)``,
  which the connecting side checks, so it never talks to an impostor either.

A HELLO that fails is refused with ``ERROR{code: unauthenticated}``, logged with the peer's
address, and the connection is closed before any other frame is read.
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

SECRET_ENV = "PDD_PLANE_SECRET_FILE"
MAX_SKEW_S = 60.0


class AuthError(Exception):
    """A handshake that does not prove the plane's secret."""


def new_secret_file(path: Path) -> Path:
    """Write a fresh random secret to ``path``, readable by its owner only (0600)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secrets.token_hex(32))
    os.chmod(path, 0o600)
    return path


def read_secret_file(path: Path | str) -> bytes:
    """The secret in ``path``; ``AuthError`` if it is missing, empty or readable by others."""
    target = Path(path)
    try:
        mode = target.stat().st_mode
        text = target.read_text().strip()
    except OSError as exc:
        raise AuthError(f"{SECRET_ENV}: cannot read {target}: {exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AuthError(f"{SECRET_ENV}: {target} must be readable by its owner only (chmod 600)")
    if not text:
        raise AuthError(f"{SECRET_ENV}: {target} is empty")
    return text.encode()


def secret_from_env(environ: Mapping[str, str] | None = None) -> bytes:
    """The plane secret named by ``PDD_PLANE_SECRET_FILE``; ``AuthError`` without one."""
    env = os.environ if environ is None else environ
    path = env.get(SECRET_ENV, "")
    if not path:
        raise AuthError(f"{SECRET_ENV}: not set (the path of the plane's 0600 secret file)")
    return read_secret_file(path)


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

    def hello(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A HELLO body (``role``, ``agent_id``, ...) with a fresh nonce, time and MAC."""
        nonce, now = secrets.token_hex(16), time.time()
        mac = _mac(self._secret, "hello", body.get("role"), body.get("agent_id"), nonce, now)
        return {**body, "nonce": nonce, "ts": now, "mac": mac}

    def check_hello(self, body: Mapping[str, Any]) -> None:
        """Accept a HELLO body or raise ``AuthError`` (bad MAC, stale, replayed)."""
        nonce, stamp, mac = body.get("nonce"), body.get("ts"), body.get("mac")
        if not isinstance(nonce, str) or not isinstance(mac, str):
            raise AuthError("no proof of the plane secret")
        if isinstance(stamp, bool) or not isinstance(stamp, int | float):
            raise AuthError("no timestamp")
        expected = _mac(self._secret, "hello", body.get("role"), body.get("agent_id"), nonce, stamp)
        if not hmac.compare_digest(expected, mac):
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
        """Accept the peer's HELLO_ACK to our ``hello`` or raise ``AuthError``."""
        mac = ack.get("mac")
        expected = _mac(self._secret, "ack", hello.get("nonce"), ack.get("agent_id"))
        if not isinstance(mac, str) or not hmac.compare_digest(expected, mac):
            raise AuthError("the peer did not prove the plane secret")
