"""Links the transfer tests share: a WAN line of 8 Gbps, the same without RTT, and one with
jitter."""

from __future__ import annotations

from pdd_core.specs import LinkKind, LinkSpec

# 8 Gbps = 1e9 bytes/s, so a gigabyte takes exactly one second of line time.
LINE = LinkSpec(
    id="line", kind=LinkKind.WAN, source_site="a", target_site="b", bandwidth_gbps=8, rtt_ms=10
)
NO_RTT = LinkSpec(
    id="bare", kind=LinkKind.WAN, source_site="a", target_site="b", bandwidth_gbps=8, rtt_ms=0
)
JITTERY = LinkSpec(
    id="jittery",
    kind=LinkKind.WAN,
    source_site="a",
    target_site="b",
    bandwidth_gbps=8,
    rtt_ms=10,
    jitter_ms=5,
    bandwidth_jitter=0.2,
)
GB = 1e9
