"""The HELLO handshake's proof of the plane secret: MACs, freshness, replays, file modes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pdd_core.agent.auth import AuthError, PlaneAuth, new_secret_file, read_secret_file

ME = {"role": "prefill", "agent_id": "p-0", "model": "m"}


def test_a_signed_hello_and_its_ack_are_accepted_both_ways() -> None:
    client, server = PlaneAuth(b"s3cret"), PlaneAuth(b"s3cret")

    hello = client.hello(ME)
    server.check_hello(hello)
    ack = server.ack({"role": "main", "agent_id": "md-0"}, hello)
    client.check_ack(ack, hello)

    assert ack["agent_id"] == "md-0"


@pytest.mark.parametrize(
    "tamper",
    [
        lambda h: {k: v for k, v in h.items() if k != "mac"},
        lambda h: {**h, "role": "gateway"},
        lambda h: {**h, "mac": "0" * 64},
        lambda h: {**h, "ts": "now"},
    ],
)
def test_a_hello_that_does_not_prove_the_secret_is_refused(tamper: object) -> None:
    hello = PlaneAuth(b"s3cret").hello(ME)

    with pytest.raises(AuthError):
        PlaneAuth(b"s3cret").check_hello(tamper(hello))  # type: ignore[operator]


def test_another_planes_secret_a_replay_and_a_stale_hello_are_refused() -> None:
    server = PlaneAuth(b"s3cret", max_skew_s=5)
    hello = PlaneAuth(b"s3cret", max_skew_s=5).hello(ME)
    server.check_hello(hello)

    with pytest.raises(AuthError, match="wrong proof"):
        server.check_hello(PlaneAuth(b"other").hello(ME))
    with pytest.raises(AuthError, match="replayed"):
        server.check_hello(hello)
    stale = PlaneAuth(b"s3cret").hello(ME)
    stale_server = PlaneAuth(b"s3cret", max_skew_s=0.001)
    time.sleep(0.01)
    with pytest.raises(AuthError, match="stale"):
        stale_server.check_hello(stale)


def test_an_ack_from_an_impostor_is_refused() -> None:
    hello = PlaneAuth(b"s3cret").hello(ME)
    forged = PlaneAuth(b"guess").ack({"agent_id": "md-0"}, hello)

    with pytest.raises(AuthError):
        PlaneAuth(b"s3cret").check_ack(forged, hello)


def test_the_secret_file_is_owner_only_and_a_shared_one_is_refused(tmp_path: Path) -> None:
    path = new_secret_file(tmp_path / "plane.secret")

    assert path.stat().st_mode & 0o777 == 0o600
    assert len(read_secret_file(path)) == 64
    path.chmod(0o644)
    with pytest.raises(AuthError, match="owner only"):
        read_secret_file(path)
