"""Measured profiles: pass times of a real engine on a real chip, used instead of the roofline.

``pdd_core.perf`` predicts every pass from a chip's datasheet; for a chip the project can run
(a CPU under llama.cpp, say) a measurement is better evidence. A profile is a JSON file that
``bench/bench_llamacpp.py --profile-out`` writes (format in ``docs/profiles.md``): prefill
throughput, decode-step times at measured batch sizes, KV bytes per token and KV export/import
cost. Registered profiles replace the roofline in ``perf.prefill_time``, ``perf.extend_time``
and ``perf.decode_step_time`` for their (model, chip) pair on single-chip instances, so the
simulator, the planner and the router use them without knowing. ``PDD_PROFILES`` (paths
separated by ``:``) registers profiles at import, so every CLI takes one without a flag.

The model is deliberately simple and stated: prefill costs ``tokens / prefill_tokens_per_s``
(measured at ``prefill_tokens`` per pass; attention growth with context is not modelled), and
a decode step is interpolated linearly in batch size between measured points (measured at
``decode_context`` tokens; extrapolated linearly past the largest batch).
"""

from __future__ import annotations

import json
import os
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdd_core.errors import PddError
from pdd_core.roofline import Timing

if TYPE_CHECKING:
    from pdd_core.specs import ChipSpec, ModelSpec

FORMAT = "pdd-measured-profile/1"
ENV = "PDD_PROFILES"


class ProfileError(PddError, ValueError):
    """A profile file is malformed; the message names the field."""


@dataclass(frozen=True, slots=True)
class MeasuredProfile:
    """What was measured for one model on one chip (see the module docstring)."""

    model: str
    chip: str
    prefill_tokens_per_s: float
    decode_step_s: tuple[tuple[int, float], ...]  # (batch, seconds), batch ascending
    kv_bytes_per_token: float
    export_s_per_mb: float = 0.0
    import_s_per_mb: float = 0.0
    prefill_tokens: int = 0
    decode_context: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        if self.prefill_tokens_per_s <= 0:
            raise ProfileError("prefill_tokens_per_s: must be positive")
        if not self.decode_step_s:
            raise ProfileError("decode_step_s: needs at least one measured batch size")
        batches = [b for b, _ in self.decode_step_s]
        if batches != sorted(set(batches)) or batches[0] < 1:
            raise ProfileError("decode_step_s: batch sizes must be distinct and positive")
        if any(s <= 0 for _, s in self.decode_step_s):
            raise ProfileError("decode_step_s: times must be positive")
        if self.kv_bytes_per_token <= 0:
            raise ProfileError("kv_bytes_per_token: must be positive")

    def prefill_seconds(self, new_tokens: int, batch: int = 1) -> float:
        return batch * new_tokens / self.prefill_tokens_per_s

    def decode_seconds(self, batch: int) -> float:
        """A decode step of ``batch`` sequences: linear between measured batch sizes, flat
        below the smallest, extended along the last segment (or proportionally, with a single
        point) above the largest."""
        points = self.decode_step_s
        batches = [b for b, _ in points]
        if batch <= batches[0]:
            return points[0][1]
        if len(points) == 1:
            return points[0][1] * batch / batches[0]
        index = min(bisect_left(batches, batch), len(points) - 1)
        (b0, s0), (b1, s1) = points[index - 1], points[index]
        return max(s0 + (s1 - s0) * (batch - b0) / (b1 - b0), points[0][1])

    def timing(self, seconds: float) -> Timing:
        """A ``Timing`` of a measured pass: the whole time is reported as ``compute_s``
        (a measurement does not say which resource bound it)."""
        return Timing(seconds, seconds, 0.0, 0.0, 0.0, "compute")

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "model": self.model,
            "chip": self.chip,
            "source": self.source,
            "prefill_tokens_per_s": self.prefill_tokens_per_s,
            "prefill_tokens": self.prefill_tokens,
            "decode_step_s": {str(b): s for b, s in self.decode_step_s},
            "decode_context": self.decode_context,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "export_s_per_mb": self.export_s_per_mb,
            "import_s_per_mb": self.import_s_per_mb,
        }


def profile_from_dict(raw: dict[str, Any]) -> MeasuredProfile:
    """Parse the JSON form; ``ProfileError`` names the first bad field."""
    if raw.get("format") != FORMAT:
        raise ProfileError(f"format: must be {FORMAT!r}")
    steps = raw.get("decode_step_s")
    if not isinstance(steps, dict):
        raise ProfileError("decode_step_s: must map batch size to seconds")
    try:
        decode = tuple(sorted((int(b), float(s)) for b, s in steps.items()))
        return MeasuredProfile(
            model=str(raw["model"]),
            chip=str(raw["chip"]),
            prefill_tokens_per_s=float(raw["prefill_tokens_per_s"]),
            decode_step_s=decode,
            kv_bytes_per_token=float(raw["kv_bytes_per_token"]),
            export_s_per_mb=float(raw.get("export_s_per_mb", 0.0)),
            import_s_per_mb=float(raw.get("import_s_per_mb", 0.0)),
            prefill_tokens=int(raw.get("prefill_tokens", 0)),
            decode_context=int(raw.get("decode_context", 0)),
            source=str(raw.get("source", "")),
        )
    except KeyError as exc:
        raise ProfileError(f"{exc.args[0]}: required") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ProfileError):
            raise
        raise ProfileError(f"a number is malformed: {exc}") from None


_REGISTRY: dict[tuple[str, str], MeasuredProfile] = {}


def register(profile: MeasuredProfile) -> None:
    """Use ``profile`` instead of the roofline for its (model, chip) from now on."""
    _REGISTRY[(profile.model, profile.chip)] = profile


def unregister(model: str, chip: str) -> None:
    _REGISTRY.pop((model, chip), None)


def load(path: Path | str) -> MeasuredProfile:
    """Read a profile file and register it."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ProfileError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: must hold a JSON object")
    profile = profile_from_dict(raw)
    register(profile)
    return profile


def lookup(model: ModelSpec, chip: ChipSpec, chips: int = 1) -> MeasuredProfile | None:
    """The registered profile of ``model`` on ``chip`` for an instance of ``chips`` chips, if
    any (profiles are measured on one device, so only single-chip instances use them)."""
    if chips != 1 or not _REGISTRY:
        return None
    return _REGISTRY.get((model.id, chip.id))


for _path in filter(None, os.environ.get(ENV, "").split(os.pathsep)):
    load(_path)
