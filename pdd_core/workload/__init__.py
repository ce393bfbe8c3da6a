"""Workloads: one ``Request`` record, readers for public traces, a synthetic agentic generator.

Everything that consumes requests (the simulator, the router, the trace tool, the planner)
takes ``Request`` objects, whichever trace or generator produced them.
"""

from pdd_core.workload.fixed import FixedWorkload, generate_fixed
from pdd_core.workload.generator import AgenticWorkload, generate_agentic, stream_agentic
from pdd_core.workload.readers import (
    DEFAULT_BLOCK_SIZE,
    FORMATS,
    detect_format,
    read_azure,
    read_mooncake,
    read_qwen,
    read_trace,
)
from pdd_core.workload.request import Request, Trace, TraceFormatError
from pdd_core.workload.stats import TraceStats, replay_hits, trace_stats
from pdd_core.workload.stream import SessionStream, in_arrival_order
from pdd_core.workload.writer import write_mooncake, write_mooncake_file

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "FORMATS",
    "AgenticWorkload",
    "FixedWorkload",
    "Request",
    "SessionStream",
    "Trace",
    "TraceFormatError",
    "TraceStats",
    "detect_format",
    "generate_agentic",
    "generate_fixed",
    "in_arrival_order",
    "read_azure",
    "read_mooncake",
    "read_qwen",
    "read_trace",
    "replay_hits",
    "stream_agentic",
    "trace_stats",
    "write_mooncake",
    "write_mooncake_file",
]
