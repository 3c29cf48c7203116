"""``POST .../context`` (one recall laid out for a prompt) and ``POST .../answer`` (a reply).

The chat model behind ``/answer`` is handed to ``create_app`` and kept in
``app.state`` under :data:`ANSWERER_ATTRIBUTE`; without one ``/answer`` says
which settings to set (409 ``not_configured``) before recalling anything.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from cogsub.api.deps import Bank, Service
from cogsub.api.errors import BANK_ERRORS, BODY_ERRORS, ErrorBody
from cogsub.core.context import Answer, AnswerRequest, ContextBlock, ContextRequest
from cogsub.recall.answer import ChatModel, answer
from cogsub.recall.context_block import context_block

ANSWERER_ATTRIBUTE = "cogsub_answerer"

router = APIRouter(prefix="/v1/banks/{bank_id}", tags=["recall"])


def _answerer(request: Request) -> ChatModel | None:
    model: ChatModel | None = getattr(request.app.state, ANSWERER_ATTRIBUTE, None)
    return model


Answerer = Annotated[ChatModel | None, Depends(_answerer)]


@router.post(
    "/context",
    operation_id="context",
    summary="A context block: one recall laid out by type for a prompt, within max_tokens",
    responses={**BANK_ERRORS, **BODY_ERRORS},
)
async def context(bank_id: Bank, service: Service, body: ContextRequest) -> ContextBlock:
    """Rules, procedures, profile, facts, reasoning; each item led by its memory id."""
    return await context_block(service, bank_id, body)


@router.post(
    "/answer",
    operation_id="answer",
    summary="Answer a question from the bank's memories with the configured chat model",
    responses={
        **BANK_ERRORS,
        **BODY_ERRORS,
        409: {"model": ErrorBody, "description": "No chat model configured (`not_configured`)"},
    },
)
async def answer_question(
    bank_id: Bank, service: Service, model: Answerer, body: AnswerRequest
) -> Answer:
    """The answer, the memory ids it cites (only ids in the block), and the block itself."""
    return await answer(service, model, bank_id, body)
