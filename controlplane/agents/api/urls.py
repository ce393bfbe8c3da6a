"""Agent routes on the project's one router: /api/v1/agents/ (+ register/, <id>/heartbeat/)."""

from controlplane.agents.api import views

ROUTES = (("agents", views.AgentViewSet, "agent"),)
