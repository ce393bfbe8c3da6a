"""``pdd trace stats`` and ``pdd trace generate`` through the real command-line entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdd_core.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "fixtures" / "traces"
CONVERSATION = ROOT.parent / "shared" / "data" / "mooncake_conversation_trace.jsonl"


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, object]:
    assert main(argv) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_stats_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "stats", str(SAMPLES / "qwen_bailian_example.jsonl")]) == 0

    out = capsys.readouterr().out
    assert "(qwen, 16-token blocks)" in out
    assert "requests        6 over 4.0 s = 1.50 req/s; 0 malformed lines skipped" in out
    # Hand-computed in test_workload_readers: 160 of 305 tokens hit.
    assert "token-weighted 52.5%" in out
    for band in ("0-20%", "20-40%", "40-70%", "70-90%", "90-95%", "95-99%", "99-100%"):
        assert f"  {band}" in out


def test_stats_json_has_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, ["trace", "stats", str(SAMPLES / "azure_conv_2023_sample.csv"), "--json"])

    assert out["format"] == "azure"
    assert out["requests"] == 200
    assert out["block_size"] is None
    hit = out["hit"]
    assert isinstance(hit, dict)
    assert hit["token_weighted"] == 0
    assert hit["bands"]["0-20%"] == 1.0
    assert set(out["input_tokens"]) == {"mean", "p50", "p90", "p99"}  # type: ignore[arg-type]


def test_stats_with_a_small_cache_hits_less(capsys: pytest.CaptureFixture[str]) -> None:
    sample = str(SAMPLES / "mooncake_conversation_sample.jsonl")
    infinite = _json(capsys, ["trace", "stats", sample, "--json"])
    small = _json(capsys, ["trace", "stats", sample, "--json", "--cache-tokens", "20K"])

    assert small["cache_tokens"] == 20_000
    assert small["hit"]["token_weighted"] < infinite["hit"]["token_weighted"]  # type: ignore[index]
    assert small["evicted_blocks"] > 0  # type: ignore[operator]


def test_malformed_trace_exits_2_with_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n', encoding="utf-8")

    assert main(["trace", "stats", str(path)]) == 2
    assert f"{path}:1: hash_ids: missing" in capsys.readouterr().err

    assert main(["trace", "stats", str(path), "--skip-invalid"]) == 0
    assert "1 malformed lines skipped" in capsys.readouterr().out


def test_generate_then_stats_shows_the_agentic_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "agentic.jsonl"

    assert main(["trace", "generate", "--out", str(out_file)]) == 0
    assert "wrote" in capsys.readouterr().err
    stats = _json(capsys, ["trace", "stats", str(out_file), "--json"])

    hit = stats["hit"]
    assert isinstance(hit, dict)
    assert 0.87 <= hit["request_weighted"] <= 0.94
    assert 0.70 <= hit["share_at_least_95"] <= 0.80


def test_generate_to_stdout_with_options(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["trace", "generate", "--sessions", "3", "--seed", "4", "--singular-share", "0"]
    assert main(argv) == 0

    lines = capsys.readouterr().out.splitlines()
    records = [json.loads(line) for line in lines]
    assert {r["session"] for r in records} <= {"s00000", "s00001", "s00002"}
    assert all(r["hash_ids"] for r in records)


# The bundled sample always; the full public trace too where ../shared/data exists.
CONVERSATION_FACTS = [(SAMPLES / "mooncake_conversation_sample.jsonl", "token-weighted 5.9%")] + (
    [(CONVERSATION, "token-weighted 37.4%")] if CONVERSATION.exists() else []
)


@pytest.mark.parametrize(("path", "expected"), CONVERSATION_FACTS,
                         ids=lambda v: v.name if isinstance(v, Path) else None)  # fmt: skip
def test_stats_on_the_mooncake_conversation_trace(
    capsys: pytest.CaptureFixture[str], path: Path, expected: str
) -> None:
    assert main(["trace", "stats", str(path)]) == 0
    assert expected in capsys.readouterr().out
