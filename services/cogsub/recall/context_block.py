"""A context block: one recall laid out the way an agent acts on it (pure, but for one call).

Sections come in the order an agent needs them: rules (preferences, then
standing corrections), procedures (numbered steps, with their version), the
profile, facts and observations (with their dates), then reasoning. Each item
starts with its memory id, so whatever the agent acts on can be traced back.

The budget is the whole markdown block — headings, ids and dates included —
counted with recall's own token estimate, so "1,000 tokens" means the same in
both. Items are admitted best-ranked first, each whole or not at all: one that
would overflow is skipped and the next-ranked tried, as recall's budget does.
What is no longer true is left out before the budget is spent: a memory
superseded by another, an older version of a procedure, a second copy of
the same words, and a correction whose preference or procedure repair was
recalled too (consolidation's ids are functions of the correction's id, so
the layout knows them without reading anything).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from cogsub.core.context import (
    ContextBlock,
    ContextFormat,
    ContextItem,
    ContextRequest,
    ContextSection,
    SectionName,
)
from cogsub.core.derived import DerivedKind, derived_id
from cogsub.core.events import FactType
from cogsub.core.memory import (
    MAX_RECALL_K,
    MemoryHit,
    RecallRequest,
    RecallResponse,
    procedure_text,
)
from cogsub.recall.ranking import procedure_version
from cogsub.recall.retain import same_content_key

SECTION_TITLES = {
    SectionName.RULES: "Rules",
    SectionName.PROCEDURES: "Procedures",
    SectionName.PROFILE: "Profile",
    SectionName.FACTS: "Facts",
    SectionName.REASONING: "Reasoning",
}
SECTION_ORDER = tuple(SECTION_TITLES)
_SECTION_OF: dict[FactType | None, SectionName] = {
    FactType.PREFERENCE: SectionName.RULES,
    FactType.CORRECTION: SectionName.RULES,
    FactType.PROCEDURE: SectionName.PROCEDURES,
    FactType.PROFILE: SectionName.PROFILE,
    FactType.WORLD: SectionName.FACTS,
    FactType.EXPERIENCE: SectionName.FACTS,
    FactType.OBSERVATION: SectionName.FACTS,
    None: SectionName.FACTS,  # an untyped experience is still something that happened
    FactType.REASONING: SectionName.REASONING,
}
# Within the rules, what the user prefers comes before what they corrected.
_RULE_RANK = {FactType.PREFERENCE: 0, FactType.CORRECTION: 1}
_INDENT = "  "
_BETWEEN = "\n\n"
#: What ``estimate_tokens`` divides a text's length by (held to it by a test).
CHARS_PER_TOKEN = 4
#: A block's budget over this is how many memories it recalls (see ``recall_k``).
TOKENS_PER_ITEM = 25
MIN_RECALL_K = 10


class Recalls(Protocol):
    """The one recall a context block is laid out from."""

    async def recall(self, bank_id: str, request: RecallRequest) -> RecallResponse: ...


async def context_block(memory: Recalls, bank_id: str, request: ContextRequest) -> ContextBlock:
    """Recall once for ``request.query`` and lay the results out within ``request.max_tokens``."""
    recalled = await memory.recall(bank_id, recall_request_for(request))
    return lay_out(bank_id, request, recalled.results)


def recall_request_for(request: ContextRequest) -> RecallRequest:
    """The recall behind a context block: enough memories to fill the budget, newest versions.

    The layout does the budgeting: recall with a budget of its own keeps reading the
    archive past a full budget for smaller memories, which the block cannot hold anyway.
    """
    return RecallRequest(
        query=request.query,
        types=request.types,
        tags=request.tags,
        k=recall_k(request.max_tokens),
        session_id=request.session_id,
        reinforce=request.reinforce,
    )


def recall_k(max_tokens: int) -> int:
    """How many memories to recall for a budget: about one per ``TOKENS_PER_ITEM`` tokens.

    A block line costs its text plus ~10 tokens of id, date and bullet, and a typical
    memory is a sentence or two, so fewer memories than this rarely fill the budget,
    while every memory recalled costs an archive read.
    """
    return max(MIN_RECALL_K, min(MAX_RECALL_K, -(-max_tokens // TOKENS_PER_ITEM)))


def lay_out(bank_id: str, request: ContextRequest, ranked: Sequence[MemoryHit]) -> ContextBlock:
    """The block of ``ranked`` (best first) for ``request``: standing memories, within budget."""
    chosen: dict[SectionName, list[tuple[ContextItem, str]]] = {n: [] for n in SECTION_ORDER}
    chars = 0  # the length of the markdown block so far, kept without rendering it again
    for hit in standing(ranked, bank_id):
        name, item = _SECTION_OF[hit.fact_type], _item(hit)
        line = _line(name, item)
        added = len(line) + 1  # the line and the newline before it
        if not chosen[name]:
            added += len(_heading(name)) + (len(_BETWEEN) if chars else 0)
        if tokens_for(chars + added) <= request.max_tokens:
            chosen[name].append((item, line))
            chars += added
    # A stable sort keeps rank order among preferences and among corrections.
    chosen[SectionName.RULES].sort(key=lambda pair: _RULE_RANK[pair[0].type or FactType.CORRECTION])
    sections = [
        ContextSection(name=name, items=[item for item, _ in pairs])
        for name, pairs in chosen.items()
        if pairs
    ]
    text = render_markdown(sections)
    return ContextBlock(
        bank_id=bank_id,
        query=request.query,
        format=request.format,
        tokens=tokens_for(len(text)),
        max_tokens=request.max_tokens,
        text=text if request.format is ContextFormat.MARKDOWN else "",
        sections=sections,
    )


def tokens_for(chars: int) -> int:
    """Recall's ``estimate_tokens`` of a text this long (it counts by length alone); 0 for none.

    The layout admits memories by the block's length rather than rendering the block
    again for each one; a test holds this to ``estimate_tokens`` itself.
    """
    return -(-chars // CHARS_PER_TOKEN)


def standing(ranked: Sequence[MemoryHit], bank_id: str) -> list[MemoryHit]:
    """``ranked`` without what is superseded, repeated or distilled, in the same order.

    Recall already drops superseded memories by default; the layout checks again
    so that a block never shows two versions of one procedure, whatever it was given.
    """
    replaced = {old for hit in ranked for old in hit.supersedes}
    distilled = _distilled_corrections(ranked, bank_id, replaced)
    newest: dict[str, int] = {}
    for hit in ranked:
        found = _procedure(hit)
        if found is not None:
            newest[found[0]] = max(found[1], newest.get(found[0], found[1]))
    seen_ids: set[str] = set()
    seen_texts: set[str] = set()
    kept = []
    for hit in ranked:
        found = _procedure(hit)
        older = found is not None and found[1] < newest[found[0]]
        key = same_content_key(hit.text)
        if hit.superseded_by or hit.id in replaced or hit.id in distilled or older:
            continue
        if hit.id in seen_ids or key in seen_texts:
            continue
        seen_ids.add(hit.id)
        seen_texts.add(key)
        kept.append(hit)
    return kept


def _distilled_corrections(
    ranked: Sequence[MemoryHit], bank_id: str, replaced: set[str]
) -> set[str]:
    """The corrections in ``ranked`` whose preference or repair is there too, or lost to one.

    A consumed correction stays indexed as evidence, but once its rule stands in the
    block as a preference (or a procedure's new step) repeating it in its "no —" words
    only spends the budget twice; a distilled rule that lost a conflict is replaced too.
    """
    present = {hit.id for hit in ranked} | replaced
    return {
        hit.id
        for hit in ranked
        if hit.fact_type is FactType.CORRECTION
        and any(
            derived_id(kind, bank_id, hit.id) in present
            for kind in (DerivedKind.PREFERENCE, DerivedKind.PROCEDURE)
        )
    }


def _procedure(hit: MemoryHit) -> tuple[str, int] | None:
    if hit.fact_type is not FactType.PROCEDURE:
        return None
    return procedure_version(hit.tags)


def _item(hit: MemoryHit) -> ContextItem:
    return ContextItem(
        memory_id=hit.id,
        type=hit.fact_type,
        text=_procedure_block(hit) if hit.fact_type is FactType.PROCEDURE else hit.text,
        timestamp=hit.timestamp,
        version=hit.version,
        score=hit.score,
    )


def _procedure_block(hit: MemoryHit) -> str:
    if hit.steps:
        return procedure_text(hit.steps, hit.rationale)
    return hit.text


def render_markdown(sections: Sequence[ContextSection]) -> str:
    """The prompt-ready block: one ``##`` heading per section, one bullet per memory."""
    return _BETWEEN.join(
        "\n".join([_heading(s.name), *(_line(s.name, i) for i in s.items)]) for s in sections
    )


def _heading(name: SectionName) -> str:
    return f"## {SECTION_TITLES[name]}"


def _line(section: SectionName, item: ContextItem) -> str:
    """One memory as a bullet led by its id; its further lines indented under it."""
    if section is SectionName.PROCEDURES:
        version = f" v{item.version}" if item.version is not None else ""
        head, rest = f"procedure{version}:", item.text.splitlines()
    else:
        first, *rest = item.text.splitlines() or [""]
        head = f"({item.type}) {first}" if section is SectionName.RULES else first
        if section is SectionName.FACTS:
            kind = f" {item.type}" if item.type is not None else ""
            head = f"{item.timestamp[:10]}{kind}: {first}"
    return "\n".join([f"- [{item.memory_id}] {head}", *(_INDENT + line for line in rest)])
