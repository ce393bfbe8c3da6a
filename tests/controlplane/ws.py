"""WebSocket helpers for the control plane's tests: refused handshakes and their close codes."""

from __future__ import annotations

from channels.testing import WebsocketCommunicator

from controlplane.asgi import application


def communicator(path: str, token: str | None = None) -> WebsocketCommunicator:
    """A communicator on the project's ASGI app, with a bearer token when one is given."""
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    return WebsocketCommunicator(application, path, headers=headers)


async def refusal_code(path: str, token: str | None = None) -> int:
    """The close code a refused handshake ends with (the server accepts, then closes)."""
    ws = communicator(path, token)
    connected, _ = await ws.connect(timeout=5)
    assert connected
    message = await ws.receive_output(timeout=5)
    assert message["type"] == "websocket.close"
    await ws.disconnect(timeout=5)  # the client's side of the closing handshake
    return int(message["code"])
