"""``context`` and ``answer`` of both SDK clients: in-process over the real app, and embedded."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from cogsub.api import ApiLimits, create_app
from cogsub.core.errors import InvalidInputError, NotConfiguredError
from cogsub.recall.answer import ChatAnswerer, ChatSettings
from cogsub.sdk import AsyncMemoryClient, MemoryClient
from tests.fixtures.chat_server import ChatServer
from tests.services.recall.stack import LiveStack

LIMITS = ApiLimits(max_body_bytes=65_536, readiness_timeout_s=1.0)


async def test_the_async_client_gets_the_block_and_an_answer(
    stack: LiveStack, unique_name: str, chat_server: ChatServer
) -> None:
    answerer = ChatAnswerer(ChatSettings(base_url=chat_server.api_url, model="m", timeout_s=5))
    app = create_app(service=stack.service, auth=None, limits=LIMITS, answerer=answerer)
    transport = httpx.ASGITransport(app=app)
    async with AsyncMemoryClient("http://api", transport=transport) as cm:
        steps = ["make build", "kubectl apply -f prod.yaml"]
        procedure = await cm.retain_procedure(unique_name, steps, wait=True)
        rule = await cm.retain_preference(
            unique_name, "When deploying, tag the release.", wait=True
        )
        block = await cm.context(unique_name, "deploy", max_tokens=200)
        assert block.memory_ids() == [rule.memory_id, procedure.memory_id]
        assert block.text.startswith(f"## Rules\n- [{rule.memory_id}] (preference)")
        only = await cm.context(unique_name, "deploy", types="procedure", format="json")
        assert only.text == "" and only.memory_ids() == [procedure.memory_id]
        said = {"answer": "Build, then apply.", "cited": [procedure.memory_id, "nope"]}
        await chat_server.reply(json.dumps(said))
        answered = await cm.answer(unique_name, "how do I deploy?", max_tokens=300)
        assert (answered.answer, answered.cited) == ("Build, then apply.", [procedure.memory_id])
        with pytest.raises(InvalidInputError) as raised:
            await cm.context(unique_name, "deploy", max_tokens=0)
        assert raised.value.problems[0].field == "max_tokens"


async def test_an_answer_is_narrowed_by_tags_as_a_context_block_is(
    stack: LiveStack, unique_name: str, chat_server: ChatServer
) -> None:
    answerer = ChatAnswerer(ChatSettings(base_url=chat_server.api_url, model="m", timeout_s=5))
    app = create_app(service=stack.service, auth=None, limits=LIMITS, answerer=answerer)
    async with AsyncMemoryClient("http://api", transport=httpx.ASGITransport(app=app)) as cm:
        ops = await cm.retain(unique_name, "Deploys go out on Tuesdays.", tags=["ops"], wait=True)
        await cm.retain(unique_name, "Deploys of the blog go out on Fridays.", wait=True)
        await chat_server.reply(json.dumps({"answer": "Tuesdays.", "cited": [ops.memory_id]}))
        answered = await cm.answer(
            unique_name, "when do deploys go out?", tags=["ops"], session_id="s-1"
        )
        assert answered.context.memory_ids() == [ops.memory_id]
        with pytest.raises(InvalidInputError) as raised:
            await cm.answer(unique_name, "when?", tags=["x" * 65])
        assert raised.value.problems[0].field.startswith("tags")


async def test_without_a_model_the_client_raises_not_configured(
    stack: LiveStack, unique_name: str
) -> None:
    app = create_app(service=stack.service, auth=None, limits=LIMITS)
    async with AsyncMemoryClient("http://api", transport=httpx.ASGITransport(app=app)) as cm:
        with pytest.raises(NotConfiguredError, match="COGSUB_CONSOLIDATION__LLM_MODEL"):
            await cm.answer(unique_name, "anything?")


def test_the_embedded_client_lays_out_the_same_block(tmp_path: Path, unique_name: str) -> None:
    with MemoryClient.embedded(tmp_path / "data", embedder="hash") as cm:
        kept = cm.retain(unique_name, "Acme HQ is in Berlin.", fact_type="world", wait=True)
        block = cm.context(unique_name, "where is Acme HQ?")
        assert block.memory_ids() == [kept.memory_id]
        assert (
            f"- [{kept.memory_id}] " in block.text and "world: Acme HQ is in Berlin." in block.text
        )
        with pytest.raises(NotConfiguredError):
            cm.answer(unique_name, "where is Acme HQ?")
