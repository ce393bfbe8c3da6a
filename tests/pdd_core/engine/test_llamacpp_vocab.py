"""The gateway's tokenizer of a GGUF file is the file's own vocabulary (llama.cpp's tokenizer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.llamacpp_support import require_llama_cpp, tiny_gguf

require_llama_cpp()

from pdd_core.engine.gguf_export import export_tiny  # noqa: E402
from pdd_core.engine.llamacpp import open_engine  # noqa: E402
from pdd_core.engine.llamacpp_config import settings_from_mapping  # noqa: E402
from pdd_core.engine.llamacpp_vocab import GgufTokenizer, gguf_tokenizer  # noqa: E402
from pdd_core.engine.tokenizer import EOS, ByteTokenizer, bpe  # noqa: E402

TEXTS = ["The quick brown fox", "  two  spaces, tabs\tand\nlines", "café naïve 日本語 🙂", ""]


@pytest.fixture(scope="module")
def bpe_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_tiny(tmp_path_factory.mktemp("gguf") / "tiny-bpe.gguf", vocab="bpe")


def test_a_file_with_the_byte_vocabulary_keeps_the_byte_tokenizer(tmp_path: Path) -> None:
    tokenizer, eos = gguf_tokenizer({"gguf": str(tiny_gguf(tmp_path))})

    assert isinstance(tokenizer, ByteTokenizer)
    assert eos == EOS


def test_a_file_with_its_own_vocabulary_gets_that_vocabulary(bpe_gguf: Path) -> None:
    tokenizer, eos = gguf_tokenizer({"gguf": str(bpe_gguf)})

    assert isinstance(tokenizer, GgufTokenizer)
    assert eos == bpe().eos == 1
    assert tokenizer.vocab_size == bpe().vocab_size == 4096
    for text in TEXTS:
        ids = tokenizer.encode(text)
        assert ids == bpe().encode(text)
        assert tokenizer.decode(ids) == text


def test_control_text_in_a_prompt_stays_text(bpe_gguf: Path) -> None:
    tokenizer = GgufTokenizer(str(bpe_gguf))

    assert bpe().eos not in tokenizer.encode("stop here <|eos|> please")
    assert tokenizer.decode([bpe().eos]) == ""


def test_a_stream_cut_inside_a_character_decodes_whole(bpe_gguf: Path) -> None:
    tokenizer = GgufTokenizer(str(bpe_gguf))
    ids = tokenizer.encode("日本語 🙂 ok")
    stream = tokenizer.stream_decoder()

    pieces = [stream.step([token]) for token in ids] + [stream.flush()]

    assert "".join(pieces) == "日本語 🙂 ok"
    assert "\ufffd" not in "".join(pieces)


def test_the_engine_stops_on_the_files_eos(bpe_gguf: Path, tmp_path: Path) -> None:
    with open_engine(settings_from_mapping({"gguf": str(bpe_gguf)})) as engine:
        assert engine.eos_token == 1
        assert engine.vocab_size == 4096
    with open_engine(settings_from_mapping({"gguf": str(tiny_gguf(tmp_path))})) as engine:
        assert engine.eos_token == EOS


def test_the_tiny_bpe_source_writes_the_bpe_file(tmp_path: Path) -> None:
    path = tmp_path / "models" / "written.gguf"
    tokenizer, eos = gguf_tokenizer({"gguf": str(path), "gguf_source": "tiny-bpe"})

    assert path.is_file()
    assert isinstance(tokenizer, GgufTokenizer)
    assert eos == 1


def test_an_export_whose_vocabulary_does_not_fit_the_model_is_refused(tmp_path: Path) -> None:
    from pdd_core.engine.tiny import TinyConfig

    with pytest.raises(ValueError, match="vocab 'bpe' has 4096 tokens; the model has 258"):
        export_tiny(tmp_path / "x.gguf", TinyConfig(), vocab="bpe")
    with pytest.raises(ValueError, match="vocab: must be one of byte, bpe, got 'spm'"):
        export_tiny(tmp_path / "x.gguf", vocab="spm")
    assert list(tmp_path.iterdir()) == []
