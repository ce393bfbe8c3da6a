from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Shared API plumbing: the error envelope, pagination, base viewsets, broadcast."""

    name = "controlplane.core"
    label = "core"
