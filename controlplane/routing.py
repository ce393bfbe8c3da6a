"""WebSocket routes, all behind ``accounts.channels_auth.websocket_auth_stack``."""

from django.urls import path

from controlplane.agents.consumers import AgentConfigConsumer
from controlplane.inventory.consumers import InventoryConsumer
from controlplane.telemetry.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/inventory/", InventoryConsumer.as_asgi()),
    path("ws/agents/<int:agent_id>/", AgentConfigConsumer.as_asgi()),
    path("ws/live/", LiveConsumer.as_asgi()),
]
