"""Data-plane processes and what they share: the wire protocol and the WAN link emulator.

The gateway, prefill, relay and main-decode agents (see docs/dataplane.md) speak
``protocol``'s frames to each other; ``wan`` shapes the cross-site hop between them.
"""
