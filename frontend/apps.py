from django.apps import AppConfig


class FrontendConfig(AppConfig):
    """Templates and static files (Plotly.js is served from the installed package)."""

    name = "frontend"
    label = "frontend"
