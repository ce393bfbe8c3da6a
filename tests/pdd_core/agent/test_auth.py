"""The HELLO handshake's proof of the plane secret: MACs, freshness, replays, file modes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pdd_core.agent.auth import (
    WAN_TOKEN,
    AuthError,
    PlaneAuth,
    new_secret_file,
    read_secret_file,
    secret_from_env,
)

ME = {"role": "gateway", "agent_id": "gw", "model": "m"}
P0 = {"role": "prefill", "agent_id": "p-0"}  # the listener a HELLO is meant for
TO_P0 = {"to_role": "prefill", "to_agent": "p-0"}


def test_a_signed_hello_and_its_ack_are_accepted_both_ways() -> None:
    client, server = PlaneAuth(b"s3cret"), PlaneAuth(b"s3cret")

    hello = client.hello(ME, **TO_P0)
    server.check_hello(hello, me=P0)
    ack = server.ack(P0, hello)
    client.check_ack(ack, hello)

    assert ack["agent_id"] == "p-0"


@pytest.mark.parametrize(
    "tamper",
    [
        lambda h: {k: v for k, v in h.items() if k != "mac"},
        lambda h: {**h, "role": "relay"},
        lambda h: {**h, "mac": "0" * 64},
        lambda h: {**h, "ts": "now"},
    ],
)
def test_a_hello_that_does_not_prove_the_secret_is_refused(tamper: object) -> None:
    hello = PlaneAuth(b"s3cret").hello(ME, **TO_P0)

    with pytest.raises(AuthError):
        PlaneAuth(b"s3cret").check_hello(tamper(hello), me=P0)  # type: ignore[operator]


def test_another_planes_secret_a_replay_and_a_stale_hello_are_refused() -> None:
    server = PlaneAuth(b"s3cret", max_skew_s=5)
    hello = PlaneAuth(b"s3cret", max_skew_s=5).hello(ME, **TO_P0)
    server.check_hello(hello, me=P0)

    with pytest.raises(AuthError, match="wrong proof"):
        server.check_hello(PlaneAuth(b"other").hello(ME, **TO_P0), me=P0)
    with pytest.raises(AuthError, match="replayed"):
        server.check_hello(hello, me=P0)
    stale = PlaneAuth(b"s3cret").hello(ME, **TO_P0)
    stale_server = PlaneAuth(b"s3cret", max_skew_s=0.001)
    time.sleep(0.01)
    with pytest.raises(AuthError, match="stale"):
        stale_server.check_hello(stale, me=P0)


def test_an_ack_from_an_impostor_is_refused() -> None:
    hello = PlaneAuth(b"s3cret").hello(ME, **TO_P0)
    forged = PlaneAuth(b"guess").ack(P0, hello)

    with pytest.raises(AuthError):
        PlaneAuth(b"s3cret").check_ack(forged, hello)


def test_the_secret_file_is_owner_only_and_a_shared_one_is_refused(tmp_path: Path) -> None:
    path = new_secret_file(tmp_path / "plane.secret")

    assert path.stat().st_mode & 0o777 == 0o600
    assert len(read_secret_file(path)) == 64
    path.chmod(0o644)
    with pytest.raises(AuthError, match="owner only"):
        read_secret_file(path)


def test_a_hello_meant_for_one_agent_is_refused_by_every_other() -> None:
    # Every agent of the plane holds the secret and keeps its own nonce cache.
    hello = PlaneAuth(b"s3cret").hello(ME, **TO_P0)
    p0, p1, md0 = PlaneAuth(b"s3cret"), PlaneAuth(b"s3cret"), PlaneAuth(b"s3cret")

    p0.check_hello(hello, me=P0)
    with pytest.raises(AuthError, match="meant for another agent"):
        p1.check_hello(hello, me={"role": "prefill", "agent_id": "p-1"})
    with pytest.raises(AuthError, match="meant for another agent"):
        md0.check_hello(hello, me={"role": "main", "agent_id": "md-0"})
    # Rewriting whom it is for breaks the MAC; the role is bound as well as the id.
    with pytest.raises(AuthError, match="wrong proof"):
        p1.check_hello({**hello, "to_agent": "p-1"}, me={"role": "prefill", "agent_id": "p-1"})
    with pytest.raises(AuthError):
        p0.check_hello(PlaneAuth(b"s3cret").hello(ME, to_role="main", to_agent="p-0"), me=P0)


def test_an_ack_must_come_from_the_agent_the_hello_was_meant_for() -> None:
    hello = PlaneAuth(b"s3cret").hello(ME, **TO_P0)
    other = PlaneAuth(b"s3cret").ack({"role": "prefill", "agent_id": "p-1"}, hello)

    with pytest.raises(AuthError, match="not 'p-0'"):
        PlaneAuth(b"s3cret").check_ack(other, hello)


def test_a_secret_comes_from_its_file_or_its_variable_and_never_from_a_default(
    tmp_path: Path,
) -> None:
    path = new_secret_file(tmp_path / "wan.token")

    assert secret_from_env({"PDD_WAN_TOKEN_FILE": str(path)}, WAN_TOKEN) == read_secret_file(path)
    assert secret_from_env({"PDD_PLANE_SECRET": " k8s "}) == b"k8s"
    with pytest.raises(AuthError, match="PDD_WAN_TOKEN_FILE: not set"):
        secret_from_env({}, WAN_TOKEN)
    with pytest.raises(AuthError, match="PDD_PLANE_SECRET_FILE: not set"):
        secret_from_env({"PDD_PLANE_SECRET": "  "})
