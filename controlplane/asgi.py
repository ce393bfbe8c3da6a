"""ASGI entry point served by daphne: HTTP through Django, WebSockets through Channels.

WebSocket connections are authenticated by a session cookie (browser) or an API token
(``Authorization: Bearer`` header, or ``?token=`` for clients that cannot set headers).
Under daphne, SIGTERM closes every WebSocket with a reconnect code and the process exits within
seconds (``core.shutdown``).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from controlplane.accounts.channels_auth import websocket_auth_stack  # noqa: E402
from controlplane.core import shutdown  # noqa: E402
from controlplane.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": websocket_auth_stack(URLRouter(websocket_urlpatterns)),
    }
)

shutdown.install()
