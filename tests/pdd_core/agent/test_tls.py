"""TLS on the data plane's connections: a plane's CA and certificates, mutual authentication
on real loopback sockets, refusals (plain text, another CA, another agent's certificate), and
which listeners a plane serves with TLS."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from pdd_core.agent.auth import PlaneAuth
from pdd_core.agent.config import config_from_dict
from pdd_core.agent.protocol import Frame, FrameType, control, encode_frame, read_frame
from pdd_core.agent.runtime import Conn, PeerLink, bound_address, hello, serve_frames
from pdd_core.agent.tls import (
    CA_KEY,
    OPERATOR,
    TlsContexts,
    TlsError,
    issue,
    issue_plane,
    make_plane_ca,
    peer_identity,
    serves_tls,
)

ROOT = Path(__file__).resolve().parents[3]
SECRET = b"s3cret"
AGENTS = [("gateway", "gateway", "127.0.0.1"), ("p-0", "prefill", "127.0.0.1"),
          ("md-0", "main", "127.0.0.1")]  # fmt: skip


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tls")
    issue_plane(directory, AGENTS, "127.0.0.1")
    return directory


def test_a_plane_gets_a_ca_and_a_certificate_naming_each_agent_and_its_role(plane: Path) -> None:
    keys = sorted(p.name for p in plane.glob("*.key"))

    assert keys == ["ca.key", "gateway.key", "md-0.key", "operator.key", "p-0.key", "wan.key"]
    assert {p.stat().st_mode & 0o777 for p in plane.glob("*.key")} == {0o600}
    certificate = x509.load_pem_x509_certificate((plane / "md-0.crt").read_bytes())
    ca = x509.load_pem_x509_certificate((plane / "ca.crt").read_bytes())
    subject = {a.oid: a.value for a in certificate.subject}
    assert (subject[NameOID.COMMON_NAME], subject[NameOID.ORGANIZATIONAL_UNIT_NAME]) == (
        "md-0", "main")  # fmt: skip
    assert certificate.issuer == ca.subject
    as_ssl_gives_it = {
        "subject": ((("commonName", "md-0"),), (("organizationalUnitName", "main"),))
    }
    assert peer_identity(as_ssl_gives_it) == ("md-0", "main")


async def _serve(plane: Path, agent: str, role: str) -> tuple[asyncio.Server, list[Frame]]:
    seen: list[Frame] = []

    async def handler(conn: Conn, frame: Frame) -> None:
        seen.append(frame)
        await conn.send(control(FrameType.PONG, frame.request_id))

    tls = TlsContexts.load(plane, agent).server
    server = await serve_frames("127.0.0.1", 0, hello(role, agent, "m"), handler,
                                auth=PlaneAuth(SECRET), tls=tls)  # fmt: skip
    return server, seen


def _link(plane: Path, me: str, role: str, peer: str, peer_role: str, port: int) -> PeerLink:
    context = TlsContexts.load(plane, me).client

    async def ignore(frame: Frame) -> None:
        return None

    return PeerLink(peer, ("127.0.0.1", port), hello(role, me, "m"), ignore, lambda _: None,
                    role=peer_role, connect_timeout_s=2.0, auth=PlaneAuth(SECRET),
                    tls=lambda: context)  # fmt: skip


async def test_agents_talk_over_mutual_tls(plane: Path) -> None:
    server, seen = await _serve(plane, "p-0", "prefill")
    link = _link(plane, "gateway", "gateway", "p-0", "prefill", bound_address(server)[1])
    try:
        await link.send(control(FrameType.PING, "r1"))
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        conn = await link.connection()
        assert conn.writer.get_extra_info("cipher")[1] == "TLSv1.3"
        assert [f.request_id for f in seen] == ["r1"]
    finally:
        await link.close()
        server.close()


async def test_plain_text_and_a_foreign_ca_are_refused_and_logged(
    plane: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server, seen = await _serve(plane, "p-0", "prefill")
    port = bound_address(server)[1]
    make_plane_ca(tmp_path)  # another plane's CA, and a certificate of it for "gateway"
    issue(tmp_path, "gateway", "gateway", ["127.0.0.1"])
    try:
        with caplog.at_level(logging.DEBUG):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            body = PlaneAuth(SECRET).hello(hello("gateway", "gateway", "m").body,
                                           to_role="prefill", to_agent="p-0")  # fmt: skip
            writer.write(encode_frame(control(FrameType.HELLO, "", body)))
            await writer.drain()
            plain = await asyncio.wait_for(reader.read(), 5)  # closed, nothing answered
            writer.close()
            foreign = _link(tmp_path, "gateway", "gateway", "p-0", "prefill", port)
            with pytest.raises(ConnectionError):
                await foreign.send(control(FrameType.PING, "r2"))
            for _ in range(200):  # the server logs once its side of the handshake has failed
                refusals = [r for r in caplog.records if "refused a connection" in r.getMessage()]
                if len(refusals) >= 2:
                    break
                await asyncio.sleep(0.01)
        assert plain == b""
        assert seen == []
        # The plain one (no TLS: a warning) and the foreign CA's client, which left when it
        # saw this plane's certificate (DEBUG, as a TCP health probe would).
        assert [r.levelname for r in refusals] == ["WARNING", "DEBUG"]
    finally:
        server.close()


async def test_a_certificate_must_be_the_agent_the_hello_and_the_link_name(plane: Path) -> None:
    server, seen = await _serve(plane, "p-0", "prefill")
    port = bound_address(server)[1]
    try:
        # md-0's certificate, presenting itself as the gateway in its HELLO: refused.
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=TlsContexts.load(plane, "md-0").client,
            server_hostname="p-0")  # fmt: skip
        body = PlaneAuth(SECRET).hello(hello("gateway", "gateway", "m").body,
                                       to_role="prefill", to_agent="p-0")  # fmt: skip
        writer.write(encode_frame(control(FrameType.HELLO, "", body)))
        answer = await asyncio.wait_for(read_frame(reader), 5)
        writer.close()
        # A link meant for md-0 that reaches p-0 (a wrong address) refuses p-0's certificate.
        wrong = _link(plane, "gateway", "gateway", "md-0", "main", port)
        with pytest.raises(ConnectionError, match="'p-0'"):
            await wrong.send(control(FrameType.PING, "r3"))
        assert answer is not None and answer.type is FrameType.ERROR
        assert answer.body["code"] == "unauthenticated"
        assert "'md-0' (main), not 'gateway' (gateway)" in answer.body["message"]
        assert seen == []
    finally:
        server.close()


def test_missing_material_is_refused_with_the_variable_named(tmp_path: Path) -> None:
    with pytest.raises(TlsError, match="PDD_TLS_DIR: not set"):
        TlsContexts.load("", "p-0")
    make_plane_ca(tmp_path)
    with pytest.raises(TlsError, match="no usable TLS material for 'p-0'"):
        TlsContexts.load(tmp_path, "p-0")
    assert (tmp_path / CA_KEY).stat().st_mode & 0o777 == 0o600
    issue(tmp_path, OPERATOR, OPERATOR)
    assert TlsContexts.load(tmp_path, OPERATOR).client.verify_mode is ssl.CERT_REQUIRED


def test_tls_is_on_everywhere_by_default_and_always_across_sites() -> None:
    raw = json.loads((ROOT / "fixtures" / "dataplane" / "tiny.json").read_text())
    default = config_from_dict(raw)
    local_plain = config_from_dict({**raw, "tls": {"within_sites": False}})

    assert all(serves_tls(default, a.id) for a in default.agents)
    # Only agents of dc-a reach P and RLD; MD in dc-b is reached across the line.
    served = {a.id: serves_tls(local_plain, a.id) for a in local_plain.agents}
    assert served == {"gateway": False, "p-0": False, "p-1": False, "rld-0": False,
                      "md-0": True, "md-1": True}  # fmt: skip
    with pytest.raises(ValueError, match="within_sites"):
        config_from_dict({**raw, "tls": {"within_sites": "no"}})


def test_pdd_tls_writes_one_folder_per_site_without_the_cas_key(tmp_path: Path) -> None:
    from pdd_core.cli import main

    config = ROOT / "deploy" / "kubernetes" / "site-agents" / "dataplane.json"
    out = tmp_path / "plane"

    assert main(["tls", str(config), "--out", str(out), "--by-site"]) == 0

    files = {site: sorted(p.name for p in (out / site).iterdir()) for site in ("dc-a", "dc-b")}
    assert files["dc-b"] == ["ca.crt", "md-0.crt", "md-0.key", "md-1.crt", "md-1.key"]
    assert "ca.key" not in files["dc-a"]
    assert {"gateway.key", "p-0.key", "p-1.key", "rld-0.key", "wan.key"} <= set(files["dc-a"])
    assert {p.stat().st_mode & 0o777 for p in out.rglob("*.key")} == {0o600}
    contexts = TlsContexts.load(out / "dc-b", "md-0")  # what a dc-b pod loads
    assert contexts.server.verify_mode is ssl.CERT_REQUIRED
