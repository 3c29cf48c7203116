"""The context block's layout (pure): section order, budget, supersession, ids, duplicates."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.core.context import ContextBlock, ContextFormat, ContextRequest, SectionName
from cogsub.core.derived import DerivedKind, derived_id
from cogsub.core.events import FactType
from cogsub.core.memory import MemoryHit, RecallRequest, RecallResponse, ScoreBreakdown
from cogsub.recall.context_block import (
    SECTION_ORDER,
    context_block,
    lay_out,
    recall_k,
    recall_request_for,
    tokens_for,
)
from cogsub.recall.ranking import estimate_tokens

SIGNALS = ("relevance", "importance", "recency", "reward", "novelty", "reinforcement", "type_boost")
EXPECTED_SECTION = {
    FactType.PREFERENCE: SectionName.RULES,
    FactType.CORRECTION: SectionName.RULES,
    FactType.PROCEDURE: SectionName.PROCEDURES,
    FactType.PROFILE: SectionName.PROFILE,
    FactType.WORLD: SectionName.FACTS,
    FactType.EXPERIENCE: SectionName.FACTS,
    FactType.OBSERVATION: SectionName.FACTS,
    None: SectionName.FACTS,
    FactType.REASONING: SectionName.REASONING,
}


def hit(
    memory_id: str,
    fact_type: FactType | None,
    text: str | None = None,
    *,
    score: float = 0.5,
    procedure: tuple[str, int] | None = None,
    steps: list[str] | None = None,
    supersedes: list[str] | None = None,
    superseded_by: str | None = None,
    timestamp: str = "2024-05-01T09:30:00Z",
) -> MemoryHit:
    tags = [f"procedure:{procedure[0]}", f"version:{procedure[1]}"] if procedure else []
    body = text if text is not None else f"memory {memory_id}"
    return MemoryHit(
        id=memory_id,
        text=body,
        fact_type=fact_type,
        event_type="user_input",
        timestamp=timestamp,
        tags=tags,
        source_event_id=memory_id,
        object_storage_key=f"events/{memory_id}.json",
        score=score,
        tokens=estimate_tokens(body),
        steps=steps,
        version=procedure[1] if procedure else None,
        supersedes=supersedes or [],
        superseded_by=superseded_by,
        explain=ScoreBreakdown(**dict.fromkeys(SIGNALS, 0.0), weights={}, final=score),
    )


def request(max_tokens: int = 1_000, fmt: ContextFormat = ContextFormat.MARKDOWN) -> ContextRequest:
    return ContextRequest(query="how do I deploy?", max_tokens=max_tokens, format=fmt)


def names(block: ContextBlock) -> list[SectionName]:
    return [s.name for s in block.sections]


def test_sections_come_in_the_order_an_agent_acts_on_them() -> None:
    ranked = [
        hit("r1", FactType.REASONING, "Prod deploys fail on Fridays because of the freeze."),
        hit("w1", FactType.WORLD, "Acme HQ is in Berlin.", timestamp="2023-02-03T00:00:00Z"),
        hit("c1", FactType.CORRECTION, "No: deploy with make release, not make deploy."),
        hit("p1", FactType.PROFILE, "Jane can access the prod cluster."),
        hit("d1", FactType.PROCEDURE, procedure=("deploy", 2), steps=["make build", "make ship"]),
        hit("f1", FactType.PREFERENCE, "Prefers blue-green deploys when traffic is high."),
        hit("o1", FactType.OBSERVATION, "Deploys usually happen in the morning."),
    ]
    block = lay_out("jane", request(), ranked)
    assert names(block) == list(SECTION_ORDER)
    rules = block.sections[0].items
    assert [i.memory_id for i in rules] == ["f1", "c1"]  # preferences before corrections
    assert block.text == (
        "## Rules\n"
        "- [f1] (preference) Prefers blue-green deploys when traffic is high.\n"
        "- [c1] (correction) No: deploy with make release, not make deploy.\n"
        "\n## Procedures\n"
        "- [d1] procedure v2:\n  1. make build\n  2. make ship\n"
        "\n## Profile\n"
        "- [p1] Jane can access the prod cluster.\n"
        "\n## Facts\n"
        "- [w1] 2023-02-03 world: Acme HQ is in Berlin.\n"
        "- [o1] 2024-05-01 observation: Deploys usually happen in the morning.\n"
        "\n## Reasoning\n"
        "- [r1] Prod deploys fail on Fridays because of the freeze."
    )
    assert block.tokens == estimate_tokens(block.text)


def test_superseded_and_older_procedure_versions_are_left_out() -> None:
    ranked = [
        hit("v1", FactType.PROCEDURE, procedure=("deploy", 1), steps=["old step"]),
        hit("v3", FactType.PROCEDURE, procedure=("deploy", 3), steps=["new step"]),
        hit("v2", FactType.PROCEDURE, procedure=("deploy", 2), steps=["mid step"]),
        hit("b1", FactType.PROCEDURE, procedure=("backup", 1), steps=["dump"]),
        hit("old", FactType.WORLD, "The office is in Paris.", superseded_by="new"),
        hit("new", FactType.WORLD, "The office is in Berlin.", supersedes=["gone"]),
        hit("gone", FactType.WORLD, "The office is in Rome."),
    ]
    block = lay_out("jane", request(), ranked)
    assert block.memory_ids() == ["v3", "b1", "new"]
    assert "old step" not in block.text and "mid step" not in block.text
    assert block.sections[0].items[0].version == 3


def test_a_correction_is_left_out_once_its_distilled_rule_is_recalled() -> None:
    preference = derived_id(DerivedKind.PREFERENCE, "jane", "c1")
    repair = derived_id(DerivedKind.PROCEDURE, "jane", "c2")
    lost = derived_id(DerivedKind.PREFERENCE, "jane", "c3")
    ranked = [
        hit("c1", FactType.CORRECTION, "No — use my personal Gmail."),
        hit(preference, FactType.PREFERENCE, "Use my personal Gmail."),
        hit("c2", FactType.CORRECTION, "No — drain the pod before restart."),
        hit(repair, FactType.PROCEDURE, procedure=("deploy", 2), steps=["drain", "restart"]),
        hit("c3", FactType.CORRECTION, "No — use the blue dashboard."),
        hit("pref-x", FactType.PREFERENCE, "Use the red dashboard.", supersedes=[lost]),
        hit("c4", FactType.CORRECTION, "No — never deploy on Fridays."),
        hit(derived_id(DerivedKind.PREFERENCE, "other", "c4"), FactType.PREFERENCE, "Elsewhere."),
    ]
    block = lay_out("jane", request(), ranked)
    rules = next(s for s in block.sections if s.name is SectionName.RULES)
    # c4's preference was distilled in another bank: c4 still stands here.
    assert [i.memory_id for i in rules.items][:2] == [preference, "pref-x"]
    assert {i.memory_id for i in rules.items} & {"c1", "c2", "c3"} == set()
    assert "c4" in block.memory_ids() and repair in block.memory_ids()


def test_a_memory_or_its_words_appear_once_at_their_best_rank() -> None:
    ranked = [
        hit("a", FactType.WORLD, "Acme HQ is in Berlin.", score=0.9),
        hit("a", FactType.WORLD, "Acme HQ is in Berlin.", score=0.9),
        hit("b", FactType.OBSERVATION, "acme hq   is in BERLIN.", score=0.5),
    ]
    assert lay_out("jane", request(), ranked).memory_ids() == ["a"]


def test_the_budget_cuts_by_rank_and_skips_what_does_not_fit_whole() -> None:
    long = "x" * 400  # 100 tokens of text alone
    ranked = [
        hit("best", FactType.WORLD, "short and best"),
        hit("long", FactType.WORLD, long),
        hit("next", FactType.REASONING, "short and next"),
    ]
    block = lay_out("jane", request(max_tokens=30), ranked)
    assert block.memory_ids() == ["best", "next"]
    assert block.tokens <= 30 and long not in block.text
    whole = lay_out("jane", request(max_tokens=200), ranked)
    assert whole.memory_ids() == ["best", "long", "next"]


def test_nothing_fits_gives_an_empty_block_of_zero_tokens() -> None:
    block = lay_out("jane", request(max_tokens=1), [hit("a", FactType.WORLD, "too long a fact")])
    assert (block.text, block.tokens, block.sections) == ("", 0, [])


def test_json_format_keeps_the_sections_and_counts_the_same_tokens() -> None:
    ranked = [hit("a", FactType.WORLD, "Acme HQ is in Berlin."), hit("b", FactType.PROFILE)]
    markdown = lay_out("jane", request(), ranked)
    as_json = lay_out("jane", request(fmt=ContextFormat.JSON), ranked)
    assert as_json.text == "" and as_json.sections == markdown.sections
    assert as_json.tokens == markdown.tokens > 0
    assert json.loads(as_json.model_dump_json())["sections"][0]["name"] == "profile"


def test_multi_line_memories_stay_under_their_bullet() -> None:
    block = lay_out("jane", request(), [hit("m", FactType.WORLD, "first line\nsecond line")])
    assert block.text == "## Facts\n- [m] 2024-05-01 world: first line\n  second line"


async def test_the_block_is_laid_out_from_one_recall_of_the_newest_versions() -> None:
    asked: list[RecallRequest] = []

    class OneRecall:
        async def recall(self, bank_id: str, recall: RecallRequest) -> RecallResponse:
            asked.append(recall)
            results = [hit("a", FactType.WORLD, "Acme HQ is in Berlin.")]
            return RecallResponse(
                bank_id=bank_id, query=recall.query, results=results, candidates=1, tokens=6
            )

    wanted = ContextRequest(query="where is Acme?", max_tokens=50, types=[FactType.WORLD])
    block = await context_block(OneRecall(), "jane", wanted)
    assert len(asked) == 1 and asked[0] == recall_request_for(wanted)
    assert not asked[0].all_versions and asked[0].types == [FactType.WORLD]
    assert asked[0].max_tokens is None  # the layout budgets: recall reads no more than k
    assert block.memory_ids() == ["a"] and block.bank_id == "jane"


def test_the_recall_size_follows_the_budget_within_recalls_limits() -> None:
    budgets = (1, 250, 251, 1_000, 2_500, 100_000)
    assert [recall_k(t) for t in budgets] == [10, 10, 11, 40, 100, 100]


@given(text=st.text(max_size=2_000))
def test_the_block_counts_tokens_as_recall_does(text: str) -> None:
    assert tokens_for(len(text)) == (estimate_tokens(text) if text else 0)


# Hypothesis: any ranking of any sizes under any budget.
_TYPES = st.sampled_from([None, *FactType])
_CHARS = st.characters(codec="utf-8", exclude_categories=["Cs"])
# Mostly sentences, now and then a memory of thousands of characters (cheap to draw).
_TEXT = st.one_of(
    st.text(_CHARS, min_size=1, max_size=600),
    st.builds(
        lambda word, times: word * times,
        st.text(_CHARS, min_size=1, max_size=8),
        st.integers(100, 1_000),
    ),
)


@st.composite
def rankings(draw: st.DrawFn) -> list[MemoryHit]:
    count = draw(st.integers(0, 40))
    hits = []
    for n in range(count):
        fact_type = draw(_TYPES)
        procedure = None
        steps = None
        if fact_type is FactType.PROCEDURE:
            procedure = (
                draw(st.sampled_from(["deploy", "backup", "rollback"])),
                draw(st.integers(1, 4)),
            )
            steps = draw(st.lists(_TEXT, min_size=1, max_size=4))
        superseded_by = draw(st.sampled_from([None, None, None, "later"]))
        text = draw(_TEXT)
        hits.append(
            hit(
                f"m{n}",
                fact_type,
                text,
                score=1.0 - n / 100,
                procedure=procedure,
                steps=steps,
                superseded_by=superseded_by,
            )
        )
    return hits


@settings(max_examples=300, deadline=None)
@given(ranked=rankings(), max_tokens=st.integers(1, 3_000))
def test_any_ranking_fits_its_budget_in_order_with_ids_and_no_superseded(
    ranked: list[MemoryHit], max_tokens: int
) -> None:
    block = lay_out("bank", request(max_tokens=max_tokens), ranked)
    assert block.tokens == (estimate_tokens(block.text) if block.text else 0) <= max_tokens
    positions = [SECTION_ORDER.index(s.name) for s in block.sections]
    assert positions == sorted(set(positions))
    by_id = {h.id: h for h in ranked}
    ids = block.memory_ids()
    assert len(ids) == len(set(ids))
    newest: dict[str, int] = {}
    for h in ranked:
        if h.fact_type is FactType.PROCEDURE and h.version is not None:
            name = h.tags[0]
            newest[name] = max(newest.get(name, 0), h.version)
    for section in block.sections:
        for item in section.items:
            source = by_id[item.memory_id]
            assert EXPECTED_SECTION[source.fact_type] is section.name
            assert source.superseded_by is None
            assert f"- [{item.memory_id}] " in block.text
            if source.fact_type is FactType.PROCEDURE:
                assert source.version == newest[source.tags[0]]
        scores = [i.score for i in section.items if section.name is not SectionName.RULES]
        assert scores == sorted(scores, reverse=True)
    # Cut by rank: any standing memory left out did not fit beside those ranked above it.
    if ids:
        worst_kept = max(int(i[1:]) for i in ids)
        assert all(
            m in ids
            or by_id[m].superseded_by is not None
            or by_id[m].fact_type is FactType.PROCEDURE
            or int(m[1:]) > worst_kept
            or _would_overflow(ranked, ids, m, max_tokens)
            or _repeats(ranked, m)
            for m in by_id
        )


def _would_overflow(ranked: list[MemoryHit], ids: list[str], extra: str, budget: int) -> bool:
    wanted = {*ids, extra}
    more = lay_out("bank", request(max_tokens=100_000), [h for h in ranked if h.id in wanted])
    return more.tokens > budget


def _repeats(ranked: list[MemoryHit], memory_id: str) -> bool:
    target = next(h for h in ranked if h.id == memory_id)
    key = " ".join(target.text.split()).casefold()
    return any(
        " ".join(h.text.split()).casefold() == key
        for h in ranked[: ranked.index(target)]
        if h.superseded_by is None
    )
