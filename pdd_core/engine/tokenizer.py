"""A byte-level tokenizer: exact round trips with no vocabulary file.

The agents must turn chat text into token ids and back identically on every host; a byte-level
vocabulary (256 byte values plus BOS and EOS) needs no data file, never fails on any input, and
decodes any id sequence. The tiny numpy model and the timed engine both use it.
"""

from __future__ import annotations

from collections.abc import Iterable

BYTE_VALUES = 256
BOS = 256
EOS = 257
VOCAB_SIZE = 258


class ByteTokenizer:
    """UTF-8 bytes as token ids 0-255; ``BOS`` and ``EOS`` above them."""

    vocab_size = VOCAB_SIZE
    bos = BOS
    eos = EOS

    def encode(self, text: str, *, bos: bool = True) -> list[int]:
        """Token ids of ``text``, prefixed by ``BOS`` unless ``bos`` is false."""
        ids = list(text.encode("utf-8"))
        return [BOS, *ids] if bos else ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; special ids are dropped and invalid UTF-8 becomes U+FFFD.

        A greedy model may stop in the middle of a multi-byte character, and a stream must
        still be printable, so decoding never raises.
        """
        data = bytes(i for i in ids if 0 <= i < BYTE_VALUES)
        return data.decode("utf-8", errors="replace")
