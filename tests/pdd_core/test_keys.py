"""``pdd_core.keys.hash_key``: the one key hash of the gateway and the control plane."""

from __future__ import annotations

from pdd_core.keys import hash_key


def test_hash_key_is_the_sha256_hex_of_the_utf8_key() -> None:
    # FIPS 180-2 test vector for "abc"
    assert hash_key("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_hash_key_encodes_non_ascii_keys_as_utf8() -> None:
    assert hash_key("é") == hash_key("\u00e9") != hash_key("e")
    assert len(hash_key("é")) == 64
