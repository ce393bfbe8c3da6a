"""``/ws/inventory/``: authenticated, scoped, and pushes committed inventory changes."""

from __future__ import annotations

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from controlplane.asgi import application
from tests.controlplane.ws import refusal_code

pytestmark = pytest.mark.django_db(transaction=True)


async def _connect(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    communicator = WebsocketCommunicator(application, path, headers=headers or [])
    connected, code = await communicator.connect(timeout=5)
    return communicator, connected, code


async def test_anonymous_is_closed_with_4401() -> None:
    code = await refusal_code("/ws/inventory/")

    assert code == 4401


async def test_billing_token_is_closed_with_4403(issue_token: Any) -> None:
    from asgiref.sync import sync_to_async

    token = await sync_to_async(issue_token)("billing")

    code = await refusal_code(f"/ws/inventory/?token={token}")

    assert code == 4403


async def test_foreign_origin_is_refused(issue_token: Any) -> None:
    from asgiref.sync import sync_to_async

    token = await sync_to_async(issue_token)("viewer")

    communicator, connected, _ = await _connect(
        "/ws/inventory/",
        [(b"origin", b"https://evil.example"), (b"authorization", f"Bearer {token}".encode())],
    )
    # End the refused consumer (it waits on the channel layer until the client's disconnect):
    # left running, it hung the event loop's teardown on the Redis channel layer once in CI.
    await communicator.disconnect(timeout=5)

    assert connected is False


async def test_viewer_receives_site_created_by_operator(issue_token: Any) -> None:
    from asgiref.sync import sync_to_async
    from rest_framework.test import APIClient

    viewer_token = await sync_to_async(issue_token)("viewer")
    operator_token = await sync_to_async(issue_token)("operator")
    communicator, connected, _ = await _connect(
        "/ws/inventory/", [(b"authorization", f"Bearer {viewer_token}".encode())]
    )
    assert connected

    def create() -> int:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {operator_token}")
        return client.post("/api/v1/sites/", {"slug": "live", "name": "Live"}).status_code

    assert await sync_to_async(create)() == 201
    message = await communicator.receive_json_from(timeout=5)

    assert message == {"event": "changed", "kind": "site", "slug": "live", "action": "created"}
    await communicator.disconnect()
