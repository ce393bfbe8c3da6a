"""TLS with mutual authentication on every data-plane connection: a CA per plane, a
certificate per agent, and contexts that require the peer's.

KV caches (the users' prompts in another form) and token streams cross the line between
datacenters; the HELLO's MAC (``agent.auth``) proves the plane's secret but encrypts nothing.
So every connection between agents is TLS 1.3 and both ends present a certificate of the
plane's CA:

- ``make_plane_ca`` writes ``ca.crt`` and ``ca.key`` (ECDSA P-256, readable by its owner
  only); ``issue`` signs one agent's certificate and key (``<agent>.crt``, ``<agent>.key``):
  the subject's common name is the agent id and its organisational unit the agent's role, so a
  certificate names who may present it; ``issue_plane`` does every agent of a configuration
  (and the WAN line, and an ``operator`` client for its control endpoint). ``pdd up`` does
  this per plane in ``RUN_DIR/tls``; ``pdd tls`` does it for a deployment (Kubernetes Secrets).
- ``TlsContexts.load`` reads an agent's: a server context that requires a client certificate
  of the CA, a client context that requires the server's. Host names are not checked (the
  cross-site address is the WAN line's, not the agent's): the peer's *identity* is, by
  ``peer_identity`` against the agent the connection is for (``runtime``).

Rotation: a new certificate under the same CA takes effect when the agent restarts; a new CA
is rolled in by listing both CAs in ``ca.crt`` (a bundle), restarting the agents, issuing the
new certificates, restarting again, then dropping the old CA.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import os
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pdd_core.agent.auth import AuthError
from pdd_core.agent.config import DataPlaneConfig

log = logging.getLogger(__name__)
TLS_DIR_ENV = "PDD_TLS_DIR"
CA_CERT, CA_KEY = "ca.crt", "ca.key"
OPERATOR = "operator"  # the client certificate an operator (or a test) calls the WAN line with
DAYS = 397  # the longest leaf lifetime browsers accept; a plane's CA lives ten times that
# Every agent both serves and connects (a decode agent answers P and connects to MD).
USAGES = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]


class TlsError(AuthError):
    """TLS material that is missing or does not name the agent it is for."""


def _write_private(path: Path, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.chmod(path, 0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_plane_ca(directory: Path, *, plane: str = "pdd", days: int = 10 * DAYS) -> None:
    """A fresh CA for one plane in ``directory`` (``ca.key`` 0600, ``ca.crt``)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{plane} data-plane CA")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    _write_private(directory / CA_KEY, _key_pem(key))
    (directory / CA_CERT).write_bytes(certificate.public_bytes(serialization.Encoding.PEM))


def issue(
    directory: Path, agent_id: str, role: str, hosts: Iterable[str] = (), *, days: int = DAYS
) -> None:
    """Sign ``<agent_id>.crt`` (CN the agent id, OU its role, the host names as SANs) and write
    its key ``<agent_id>.key`` (0600), with the CA in ``directory``."""
    ca_key = serialization.load_pem_private_key((directory / CA_KEY).read_bytes(), None)
    ca = x509.load_pem_x509_certificate((directory / CA_CERT).read_bytes())
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TlsError(f"{directory / CA_KEY}: not the ECDSA key of a plane CA")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, agent_id),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role),
    ])  # fmt: skip
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    certificate = builder.sign(ca_key, hashes.SHA256())
    _write_private(directory / f"{agent_id}.key", _key_pem(key))
    (directory / f"{agent_id}.crt").write_bytes(
        certificate.public_bytes(serialization.Encoding.PEM)
    )


def issue_plane(directory: Path, agents: Iterable[tuple[str, str, str]], wan_host: str) -> None:
    """A certificate for every ``(agent id, role, host)``, the WAN line (its control endpoint)
    and an ``operator`` client of it, under the CA in ``directory`` (made if missing)."""
    if not (directory / CA_KEY).exists():
        make_plane_ca(directory)
    for agent_id, role, host in agents:
        issue(directory, agent_id, role, [host])
    issue(directory, "wan", "wan", [wan_host])
    issue(directory, OPERATOR, OPERATOR)


@dataclass(frozen=True)
class TlsContexts:
    """One agent's TLS: what it serves with and what it connects with (both require the
    peer's certificate of the plane's CA)."""

    agent_id: str
    server: ssl.SSLContext
    client: ssl.SSLContext

    @classmethod
    def load(cls, directory: Path | str, agent_id: str) -> TlsContexts:
        """``agent_id``'s contexts from ``directory`` (``ca.crt``, ``<agent_id>.crt``/``.key``);
        ``TlsError`` if a file is missing or unreadable."""
        if not directory:
            raise TlsError(f"{TLS_DIR_ENV}: not set (the directory of the plane's CA and of "
                           f"{agent_id!r}'s certificate)")  # fmt: skip
        folder = Path(directory)
        cert, key, ca = (folder / f"{agent_id}.crt", folder / f"{agent_id}.key",
                         folder / CA_CERT)  # fmt: skip
        try:
            server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            for context in (server, client):
                context.minimum_version = ssl.TLSVersion.TLSv1_3
                context.load_cert_chain(cert, key)
                context.load_verify_locations(ca)
                context.verify_mode = ssl.CERT_REQUIRED
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"{TLS_DIR_ENV}: no usable TLS material for {agent_id!r} in "
                           f"{folder}: {exc}") from None  # fmt: skip
        client.check_hostname = False  # the identity is checked instead (peer_identity)
        return cls(agent_id, server, client)


def peer_identity(peercert: Mapping[str, Any] | None) -> tuple[str, str]:
    """``(agent id, role)`` a verified peer certificate names (``getpeercert()``'s dict);
    ``TlsError`` when there is none."""
    fields: dict[str, str] = {}
    for rdn in (peercert or {}).get("subject", ()):
        for name, value in rdn:
            fields.setdefault(name, value)
    if "commonName" not in fields or "organizationalUnitName" not in fields:
        raise TlsError("the peer presented no certificate naming an agent and its role")
    return fields["commonName"], fields["organizationalUnitName"]


def check_peer(peercert: Mapping[str, Any] | None, agent_id: str, role: str) -> None:
    """``TlsError`` unless the peer's certificate is ``agent_id``'s, of ``role``."""
    named = peer_identity(peercert)
    if named != (agent_id, role):
        raise TlsError(f"the peer's certificate is {named[0]!r} ({named[1]}), not "
                       f"{agent_id!r} ({role})")  # fmt: skip


# Who opens connections to whom in a plane: the gateway to every agent, P to the relays and
# main decoders it ships KV to, the relay to the main decoder it hands a request off to.
CONNECTS_TO = {"gateway": ("prefill", "relay", "main"), "prefill": ("relay", "main"),
               "relay": ("main",)}  # fmt: skip


def serves_tls(config: DataPlaneConfig, agent_id: str) -> bool:
    """Whether ``agent_id``'s listener takes TLS only: always, unless the plane turns TLS off
    within sites (``tls.within_sites``) and no agent of another site ever connects to it."""
    if config.tls.within_sites:
        return True
    target = config.agent(agent_id)
    return any(a.site != target.site for a in config.agents
               if target.role in CONNECTS_TO.get(a.role, ()))  # fmt: skip


class PlaneTls:
    """One process's TLS: which of its connections use it, with what (loaded on first use from
    ``config.tls_dir``, so an agent object can be built, and tested, without sockets)."""

    def __init__(self, config: DataPlaneConfig, agent_id: str) -> None:
        self._config, self.agent_id = config, agent_id
        self._contexts: TlsContexts | None = None

    def follow(self, config: DataPlaneConfig) -> None:
        """The plane's membership changed (``agent.membership``): new peers resolve."""
        self._config = config

    def _loaded(self) -> TlsContexts:
        if self._contexts is None:
            self._contexts = TlsContexts.load(self._config.tls_dir, self.agent_id)
        return self._contexts

    def check(self) -> None:
        """``TlsError`` now if this process will need TLS material it does not have."""
        me = self._config.agent(self.agent_id)
        targets = CONNECTS_TO.get(me.role, ())
        peers = [a.id for a in self._config.agents if a.role in targets]
        if (me.role != "gateway" and serves_tls(self._config, self.agent_id)) or any(
            serves_tls(self._config, peer) for peer in peers
        ):
            self._loaded()

    @property
    def server(self) -> ssl.SSLContext | None:
        """The context this agent's listener serves with (None: plain, within its site)."""
        if not serves_tls(self._config, self.agent_id):
            return None
        return self._loaded().server

    def client(self, peer: str) -> ssl.SSLContext | None:
        """The context a connection to ``peer`` uses (None: plain, within the site)."""
        if not serves_tls(self._config, peer):
            return None
        return self._loaded().client


Accept = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve_tls(
    accept: Accept, host: str, port: int, context: ssl.SSLContext, *, limit: int, timeout_s: float
) -> asyncio.Server:
    """``asyncio.start_server(accept, ...)`` where every connection must first complete a TLS
    handshake with a certificate of the plane (``context``): one that does not (plain text, a
    certificate of another CA, none) is logged with the peer's address and closed, and
    ``accept`` never sees it. (``start_server(ssl=...)`` would drop such connections without a
    word: asyncio logs failed handshakes only in debug mode.)"""
    loop = asyncio.get_running_loop()

    async def upgrade(transport: asyncio.Transport) -> None:
        peer = transport.get_extra_info("peername")
        reader = asyncio.StreamReader(limit=limit)
        protocol = asyncio.StreamReaderProtocol(reader, accept)
        try:
            secured = await loop.start_tls(transport, protocol, context, server_side=True,
                                           ssl_handshake_timeout=timeout_s)  # fmt: skip
        except (OSError, TimeoutError, ConnectionError) as exc:
            # A peer that left before it said anything (a TCP health probe every few seconds,
            # a client that refused this side's certificate) is not an attempt on this one.
            quiet = isinstance(exc, ConnectionResetError | ssl.SSLEOFError | BrokenPipeError)
            log.log(logging.DEBUG if quiet else logging.WARNING,
                    "refused a connection from %s: no TLS with a certificate of this plane (%r)",
                    peer, exc)  # fmt: skip
            transport.abort()
            return
        if secured is None:  # the peer left during the handshake
            transport.abort()
            return
        protocol.connection_made(secured)  # hands ``accept`` the secured streams

    class Handshake(asyncio.Protocol):
        """Holds a new connection unread until its TLS handshake starts (``start_tls`` takes
        the transport over): nothing the peer sent can be consumed as plain bytes."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            transport.pause_reading()
            task = loop.create_task(upgrade(transport))
            _handshakes.add(task)
            task.add_done_callback(_handshakes.discard)

    return await loop.create_server(Handshake, host, port)


_handshakes: set[asyncio.Task[None]] = set()  # handshakes in progress (kept referenced)
