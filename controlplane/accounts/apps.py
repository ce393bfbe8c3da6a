from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Who may call the control plane: API tokens with scopes, and browser users' scopes."""

    name = "controlplane.accounts"
    label = "accounts"

    def ready(self) -> None:
        from controlplane.accounts import schema  # noqa: F401  (registers the OpenAPI extension)
