"""The details two statements must share before one can stand for the other."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import combinations

import pytest
from benchmarks.consolidation import load_pairs, statements
from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.consolidation.clusters import Member, clusters
from cogsub.consolidation.distinct import details, difference, may_merge
from cogsub.consolidation.similarity import content_words

AGREE = [
    ("Alice is allergic to peanuts.", "Alice has a peanut allergy."),
    ("Deploy the api with make deploy.", "To deploy the API, run make deploy."),
    ("The api team ships on Tuesdays.", "The API team ships every Tuesday."),
    ("Release v2.1 shipped on 5 March 2024.", "Version 2.1 shipped on March 5, 2024."),
    ("The contract ends on 2025-06-30.", "The contract ends on 30 June 2025."),
    ("The standup is at 3pm.", "The standup is at 15:00."),
    ("The backup runs at 2 a.m.", "The backup runs at 2am."),
    ("The cluster has three nodes.", "The cluster has 3 nodes."),
    ("The invoice was 1,200 euros.", "The invoice was 1200 euros."),
    ("Bob does not eat meat.", "Bob never eats meat."),
    ("Dana can't come.", "Dana cannot come."),
    ("Mail ops@acme.io for access.", "Write to ops@acme.io to get access."),
    ("Docs: https://docs.acme.io/api.", "The docs are at https://docs.acme.io/api"),
    ("The gateway is vpn.acme.io.", "VPN.acme.io is the gateway."),
    ("Logs go to /var/log/app.log.", "The app logs to /var/log/app.log"),
    ("We use k8s on ec2.", "We run k8s on ec2."),
    ("Shipping happens on Fridays.", "Friday is when shipping happens."),
    ("Lena's birthday is in July.", "Lena has her birthday in July."),
]
DIFFER = [
    ("Alice is allergic to peanuts.", "Bob is allergic to peanuts.", "entity"),
    ("Alice is allergic to peanuts.", "She is allergic to peanuts.", "entity"),
    ("Acme HQ is in Berlin.", "Acme HQ is in Munich.", "entity"),
    ("The db runs PostgreSQL.", "The db runs MySQL.", "entity"),
    ("We use the iPhone app.", "We use the web app.", "entity"),
    ("The cluster has three nodes.", "The cluster has five nodes.", "number"),
    ("The cluster has 3 nodes.", "The cluster has nodes.", "number"),
    ("Release v2.1 is out.", "Release v2.2 is out.", "number"),
    ("Redis listens on port 6379.", "Redis listens on port 6380.", "number"),
    ("We use k8s.", "We use k3s.", "number"),
    ("Uptime is 99.9%.", "Uptime is 99.5%.", "number"),
    ("The staging IP is 10.0.0.5.", "The staging IP is 10.0.0.6.", "address"),
    ("The staging IP is 10.0.0.5.", "The staging IP is 10.0.5.0.", "address"),
    ("Mail ops@acme.io.", "Mail sec@acme.io.", "address"),
    ("See https://acme.io/a.", "See https://acme.io/b.", "address"),
    ("The cache is db-1.internal.", "The cache is db-2.internal.", "address"),
    ("Status lives at status.acme.io.", "Status lives at status.acme.com.", "address"),
    ("Logs go to /var/log/app.log.", "Logs go to /var/log/db.log.", "address"),
    ("It shipped on 5 March 2024.", "It shipped on 6 March 2024.", "date"),
    ("It shipped on 5 March 2024.", "It shipped on 5 March 2023.", "date"),
    ("The standup is at 3pm.", "The standup is at 3am.", "date"),
    ("The standup is on Tuesdays.", "The standup is on Wednesdays.", "date"),
    ("Dana flew to Oslo yesterday.", "Dana flew to Oslo today.", "date"),
    ("The retro is in the morning.", "The retro is in the evening.", "date"),
    ("Lena's birthday is in July.", "Lena's birthday is in August.", "date"),
    ("Bob eats meat.", "Bob doesn't eat meat.", "negation"),
    ("Kim is vegetarian.", "Kim is not vegetarian.", "negation"),
    ("Nina drinks alcohol.", "Nina never drinks alcohol.", "negation"),
    ("The deploy needs a migration.", "The deploy needs no migration.", "negation"),
    ("Tests run with the cache.", "Tests run without the cache.", "negation"),
    ("Dana can attend.", "Dana cannot attend.", "negation"),
    ("The API accepts tokens.", "The API doesnt accept tokens.", "negation"),
]
FIXTURE_TEXTS = statements(load_pairs())
WHEN = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize(("a", "b"), AGREE)
def test_statements_of_one_fact_agree(a: str, b: str) -> None:
    assert difference(details(a), details(b)) is None
    assert may_merge(b, a)


@pytest.mark.parametrize(("a", "b", "kind"), DIFFER)
def test_statements_a_detail_apart_differ_in_that_detail(a: str, b: str, kind: str) -> None:
    assert difference(details(a), details(b)) == kind
    assert difference(details(b), details(a)) == kind
    assert not may_merge(a, b)


def test_common_words_that_start_a_sentence_are_not_names() -> None:
    assert details("Deploy the api. Backups run nightly. Shipping is slow.").names == set()
    assert details("Alice met Bob in Berlin; Carol stayed.").names == {
        "alice",
        "bob",
        "berlin",
        "carol",
    }
    assert details("May 5 was a Friday and it may rain.").dates == {"2000-05-05", "friday"}


@pytest.mark.parametrize("text", FIXTURE_TEXTS)
def test_every_statement_agrees_with_itself_and_itself_repeated(text: str) -> None:
    assert may_merge(text, text)
    assert may_merge(text, f"{text} {text}")


@settings(max_examples=60, deadline=None)
@given(
    chosen=st.lists(st.sampled_from(FIXTURE_TEXTS), min_size=2, max_size=40, unique=True),
    threshold=st.sampled_from([0.2, 0.3, 0.5]),
)
def test_no_group_holds_two_statements_that_differ(chosen: list[str], threshold: float) -> None:
    members = [Member(f"m-{n:03d}", t, content_words(t), (), WHEN) for n, t in enumerate(chosen)]
    for group in clusters(
        members, threshold=threshold, semantic=False, min_size=2, by_details=True
    ):
        for a, b in combinations(group, 2):
            assert may_merge(a.text, b.text), (a.text, b.text)
