"""API key hashing, shared by the data plane and the control plane.

The control plane stores and pushes only SHA-256 hex digests of whole API keys and tokens; the
gateway hashes each presented key the same way to look up its tenant. One function, so a key
hashed on one side always matches on the other. Keys carry 256 bits of entropy, so a fast hash
is enough (no slow KDF).
"""

from __future__ import annotations

import hashlib


def hash_key(raw: str) -> str:
    """SHA-256 hex of a whole API key or token (UTF-8)."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()
