"""Domain errors: what a service raises when it refuses, with no HTTP in sight.

Services raise these (or Django's ``ValidationError`` for invalid input, which models raise
too); the API layer (``core.errors.api_exception_handler``) maps each to the error envelope with
its status, and pages show ``message`` to the user.
"""

from __future__ import annotations


class DomainError(Exception):
    """A refusal a caller can act on; ``message`` says why in the caller's terms."""

    status = 400
    code = "invalid"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConflictError(DomainError):
    """Valid, but in conflict with the current state (still in use, already issued, ...)."""

    status = 409
    code = "conflict"


class ForbiddenError(DomainError):
    """The caller may not do this to this object (another site's agent, say)."""

    status = 403
    code = "permission_denied"


class NotFoundError(DomainError):
    """The thing the caller names does not exist in the current state (a pool the desired
    state does not have, an override that is not in force)."""

    status = 404
    code = "not_found"
