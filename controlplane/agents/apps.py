from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """The data-plane agents as the control plane sees them: registry, health, config rollout."""

    name = "controlplane.agents"
    label = "agents"
