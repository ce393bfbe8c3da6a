from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """The data-plane agents as the control plane sees them: registry, health, config rollout."""

    name = "controlplane.agents"
    label = "agents"

    def ready(self) -> None:
        from controlplane.agents.selectors import agent_rows, site_gateways
        from controlplane.telemetry.integrations import provide_agents

        provide_agents(agent_rows, site_gateways)
