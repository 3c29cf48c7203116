"""Recall through the real stack gives each person of an "X and Y" question a place in the top k."""

from __future__ import annotations

from pathlib import Path

from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.recall import RankingPolicy

from .stack import live_stack

SAID = [
    "Jon: I dance every day, dance is my whole life.",
    "Jon: My dance studio teaches dance to kids.",
    "Jon: Last night I watched a dance show about dance history.",
    "Gina: I used to dance in competitions.",
    "Gina: My clothing store opened this week.",
]


async def test_both_people_of_the_question_are_recalled(data_dir: Path) -> None:
    # Lexical only: the hash embedder's cosines would be noise.
    async with live_stack(data_dir, policy=RankingPolicy(semantic_weight=0.0)) as stack:
        for text in SAID:
            await stack.service.retain("b", RetainRequest(content=text, wait=True))
        asked = RecallRequest(query="Did Jon and Gina both dance?", k=2, reinforce=False)
        response = await stack.service.recall("b", asked)
        # As one query both places would go to Gina (her name is the rarer word, even in her
        # turn about her store); asked per person, each has a place, the first named first.
        texts = [r.text for r in response.results]
        assert len(texts) == 2 and texts[0].startswith("Jon: ") and texts[1] == SAID[3]
