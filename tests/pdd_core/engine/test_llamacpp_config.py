"""The engine.llamacpp section is validated at load, naming the field (no llama.cpp needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdd_core.agent.config import ConfigError, config_from_dict, load_config
from pdd_core.engine.llamacpp_config import LlamaCppSettings, settings_from_mapping

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "dataplane" / "llamacpp.json"


def test_the_fixture_names_a_generated_tiny_gguf_with_matching_kv_settings() -> None:
    config = load_config(FIXTURE)
    settings = settings_from_mapping(config.engine.llamacpp)

    assert config.engine.kind == "llamacpp"
    assert settings == LlamaCppSettings(
        gguf="var/models/tiny-test.gguf", gguf_source="tiny", threads=1, n_ctx=32768
    )
    assert settings.kv_type_id == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kv_type": "f8"}, "engine.llamacpp.kv_type: must be one of f32, f16, q8_0, bf16"),
        ({"flash_attention": "yes"}, "engine.llamacpp.flash_attention: must be true or false"),
        ({"max_sequences": 0}, r"engine.llamacpp.max_sequences: must be in \[1, 256\]"),
        ({"threads": 0}, "engine.llamacpp.threads: must be a positive integer"),
        ({"gguf_source": "hf"}, "engine.llamacpp.gguf_source: must be empty, 'tiny' or 'tiny-bpe'"),
        ({"gguf_source": "", "gguf": "/no/such.gguf"}, "engine.llamacpp.gguf: no file at"),
        ({"ctx": 5}, "engine.llamacpp.ctx: unknown field"),
    ],
)
def test_a_bad_llamacpp_setting_fails_at_load_naming_it(change: dict, message: str) -> None:
    raw = json.loads(FIXTURE.read_text())
    raw["engine"]["llamacpp"].update(change)

    with pytest.raises(ConfigError, match=message):
        config_from_dict(raw)


def test_a_missing_gguf_path_is_an_error() -> None:
    with pytest.raises(ValueError, match="gguf: the path of a GGUF model file is required"):
        LlamaCppSettings()
