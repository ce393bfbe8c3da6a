"""``/ws/inventory/``: inventory changes pushed to open pages and tools as they happen."""

from __future__ import annotations

from typing import Any

from controlplane.core.broadcast import group_name
from controlplane.core.consumers import ScopedJsonConsumer

INVENTORY_GROUP = group_name("inventory")


class InventoryConsumer(ScopedJsonConsumer):
    """Sends ``{"event": "inventory.changed", "kind": ..., "slug": ..., "action": ...}``."""

    def group_names(self) -> list[str]:
        return [INVENTORY_GROUP]

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await self.send_json(
            {
                "error": {
                    "code": "read_only",
                    "message": "This stream only sends; nothing to receive.",
                }
            }
        )
