"""The real services behind the settings: the Redis channel layer and Celery's broker URL."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from controlplane.core.broadcast import broadcast


@pytest.mark.redis
def test_redis_channel_layer_carries_a_broadcast() -> None:
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisChannelLayer"
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("test.redis.check", channel)

    sent = broadcast("test.redis.check", {"hello": "redis"}, force=True)
    message = async_to_sync(layer.receive)(channel)

    assert sent is True
    assert message == {"type": "broadcast.message", "payload": {"hello": "redis"}}
    async_to_sync(layer.group_discard)("test.redis.check", channel)


def test_broadcast_throttles_per_group() -> None:
    assert broadcast("test.throttle.a", {"n": 1}, min_interval=60) is True
    assert broadcast("test.throttle.a", {"n": 2}, min_interval=60) is False
    assert broadcast("test.throttle.b", {"n": 3}, min_interval=60) is True
    assert broadcast("test.throttle.a", {"n": 4}, min_interval=60, force=True) is True
