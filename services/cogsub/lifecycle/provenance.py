"""Which objects a forget must erase, decided from the bank's consolidation objects (pure).

A memory's content lives on in what consolidation derived from it: facts name it
as ``sourceEventId``, observations, preferences and repaired procedures list it
in ``sources``, and what was derived from those carries it further. So the set
to forget is the closure over ``sources``. Bookkeeping follows the set: the
evidence objects naming a forgotten memory (fact or source), the supersession
records naming one (loser or winner), and the consumed marker of a forgotten
correction. Surviving memories are repaired, not erased: a fact that loses
evidence has its proof recounted, a memory whose winner is forgotten is live
again, and a winner drops the ``supersedes:`` tag of a forgotten loser.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from cogsub.core.derived import CONSOLIDATION_PREFIX, is_derived_memory_key


@dataclass(frozen=True)
class Derived:
    """A derived memory of the bank and the memories it was derived from."""

    memory_id: str
    key: str
    sources: frozenset[str]


@dataclass(frozen=True)
class Supersession:
    """One archived supersession record: ``loser`` lost to ``winner``."""

    key: str
    loser: str
    winner: str


@dataclass(frozen=True)
class Evidence:
    """One proof object: ``source`` said again what ``fact`` says."""

    key: str
    fact: str
    source: str


@dataclass(frozen=True)
class Erasure:
    """The decision: ids to forget (first the one asked for), keys to erase, index repairs."""

    memory_ids: tuple[str, ...]
    object_keys: tuple[str, ...]
    proof_recount: tuple[str, ...]
    unsupersede: tuple[str, ...]
    unlink: dict[str, list[str]]


def bank_prefix(bank_id: str) -> str:
    return f"{CONSOLIDATION_PREFIX}{bank_id}/"


def folder_of(bank_id: str, key: str) -> str | None:
    """``evidence``, ``supersessions``, ``facts``… for a key under the bank's prefix."""
    rest = key.removeprefix(bank_prefix(bank_id))
    if rest == key or "/" not in rest:
        return None
    return rest.split("/", 1)[0]


def derived_from(key: str, body: bytes) -> Derived | None:
    """The provenance of the derived memory stored as ``body`` (None if it is not one)."""
    if not is_derived_memory_key(key):
        return None
    try:
        found = json.loads(body)
        structured = found.get("input", {}).get("structured")
        memory_id = str(found["eventId"])
    except (ValueError, AttributeError, KeyError, TypeError):
        return None
    sources: set[str] = set()
    if isinstance(structured, dict):
        listed = structured.get("sources")
        if isinstance(listed, list):
            sources |= {str(s) for s in listed}
        origin = structured.get("sourceEventId")
        if isinstance(origin, str):
            sources.add(origin)
    return Derived(memory_id=memory_id, key=key, sources=frozenset(sources))


def supersession_from(key: str, body: bytes) -> Supersession | None:
    try:
        found = json.loads(body)
        loser, winner = str(found["memoryId"]), str(found["supersededBy"])
    except (ValueError, KeyError, TypeError):
        return None
    return Supersession(key=key, loser=loser, winner=winner)


def evidence_from(bank_id: str, key: str) -> Evidence | None:
    """Parsed from the key alone: ``…/evidence/{fact}/{source}-{position}.json``."""
    rest = key.removeprefix(f"{bank_prefix(bank_id)}evidence/")
    fact, _, name = rest.partition("/")
    stem = name.removesuffix(".json")
    source, dash, position = stem.rpartition("-")
    if rest == key or not fact or "/" in name or not dash or not position.isdigit():
        return None
    return Evidence(key=key, fact=fact, source=source)


def closure(seed: str, derived: Iterable[Derived]) -> list[str]:
    """``seed`` and, transitively, every derived memory whose sources reach it (seed first)."""
    pending = list(derived)
    found = [seed]
    known = {seed}
    grew = True
    while grew:
        grew = False
        rest = []
        for item in pending:
            if item.memory_id not in known and item.sources & known:
                found.append(item.memory_id)
                known.add(item.memory_id)
                grew = True
            else:
                rest.append(item)
        pending = rest
    return found


def erasure(
    bank_id: str,
    seed: str,
    *,
    seed_key: str | None,
    derived: list[Derived],
    supersessions: list[Supersession],
    evidence: list[Evidence],
    keys: Iterable[str],
) -> Erasure:
    """Everything forgetting ``seed`` erases and repairs, from the bank's objects.

    ``keys`` are every key under ``consolidation/{bank}/``; ``seed_key`` is the
    seed's own archive object when it is a raw event.
    """
    ids = closure(seed, derived)
    gone = set(ids)
    by_id = {d.memory_id: d.key for d in derived}
    erase = [seed_key] if seed_key else []
    erase += [by_id[i] for i in ids if i in by_id]
    proof: set[str] = set()
    for item in evidence:
        if item.fact in gone or item.source in gone:
            erase.append(item.key)
            if item.fact not in gone:
                proof.add(item.fact)
    unsupersede: set[str] = set()
    unlink: dict[str, list[str]] = {}
    for record in supersessions:
        if record.loser in gone or record.winner in gone:
            erase.append(record.key)
            if record.loser not in gone:
                unsupersede.add(record.loser)
            elif record.winner not in gone:
                unlink.setdefault(record.winner, []).append(record.loser)
    consumed = {f"{bank_prefix(bank_id)}consumed/{i}.json" for i in gone}
    erase += [k for k in keys if k in consumed]
    return Erasure(
        memory_ids=tuple(ids),
        object_keys=tuple(dict.fromkeys(erase)),
        proof_recount=tuple(sorted(proof)),
        unsupersede=tuple(sorted(unsupersede)),
        unlink={w: sorted(losers) for w, losers in sorted(unlink.items())},
    )
