"""Documents API token authentication in the OpenAPI schema (drf-spectacular extension)."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """A bearer token in ``Authorization``; a subclass names another authentication class, its
    scheme name and ``description``."""

    target_class = "controlplane.accounts.authentication.ApiTokenAuthentication"
    name = "apiToken"
    description = "An API token `pdd_<prefix>_<secret>`; its scope decides access."

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": self.description}
