"""The question's content: its interrogative scaffolding removed (``question_content``)."""

from __future__ import annotations

import pytest

from cogsub.recall.policy import RankingPolicy
from cogsub.recall.query import question_content, without_names


@pytest.mark.parametrize(
    ("question", "content"),
    [
        # A wh-word and the auxiliary right after it.
        ("When did Melanie paint a sunrise?", "Melanie paint a sunrise"),
        ("What did Caroline research?", "Caroline research"),
        ("Where has Melanie camped?", "Melanie camped"),
        ("Why did Caroline choose the adoption agency?", "Caroline choose the adoption agency"),
        ("Who is Caroline a fan of?", "Caroline a fan of"),
        ("How does Melanie prioritize self-care?", "Melanie prioritize self-care"),
        ("What is Caroline's identity?", "Caroline's identity"),
        # The auxiliary after the wh-phrase's noun, up to three words in.
        ("What instruments does Melanie play?", "instruments Melanie play"),
        ("What fields would Caroline pursue?", "fields Caroline pursue"),
        ("What musical artists/bands has Melanie seen?", "musical artists/bands Melanie seen"),
        # Only the first auxiliary goes; "do" as the verb stays.
        ("What does Melanie do to destress?", "Melanie do to destress"),
        ("How long has Mel been married?", "Mel been married"),
        # Compound wh-phrases, a preposition before one, a contraction.
        ("How long ago was Caroline's 18th birthday?", "Caroline's 18th birthday"),
        ("How many children does Melanie have?", "children Melanie have"),
        ("How often does Gina go to the beach?", "Gina go to the beach"),
        ("What kind of art does Caroline make?", "art Caroline make"),
        ("Which types of pottery have they made?", "pottery they made"),
        ("In what ways is Caroline participating?", "ways Caroline participating"),
        ("What's the plan for June?", "the plan for June"),
        ("how did the trip go?", "the trip go"),
        # A wh-word without an auxiliary: a subject question.
        ("Who supports Caroline?", "supports Caroline"),
        ("What motivated Caroline to paint?", "motivated Caroline to paint"),
        # A leading auxiliary (a yes/no question), only with a question mark.
        ("Would Caroline pursue writing as a career?", "Caroline pursue writing as a career"),
        ("Did Melanie make the bowl in the photo?", "Melanie make the bowl in the photo"),
        ("Is the deploy blocked?", "the deploy blocked"),
        # Lead-ins, alone or after a wh-word.
        ("Do you think Caroline would move back?", "Caroline would move back"),
        ("Can you tell me, what did Jon buy?", "Jon buy"),
        ("What do you think she wants?", "she wants"),
        ("tell me about the deployment checklist", "about the deployment checklist"),
        # Questions without scaffolding lose only their question mark.
        ("Caroline's identity?", "Caroline's identity"),
        ("the release date ??", "the release date"),
        # A wh-word followed by an auxiliary makes a question without "?".
        ("what did the user say about deployments", "the user say about deployments"),
        # "May" capitalised after a wh-word is the month, not the auxiliary.
        ("What happened in May?", "happened in May"),
        # Spaces left by the removal are collapsed.
        ("  When   did  Jon   dance ? ", "Jon dance"),
    ],
)
def test_scaffolding_is_removed(question: str, content: str) -> None:
    assert question_content(question) == content


@pytest.mark.parametrize(
    "text",
    [
        # Not questions: statements, topics, a wh-word that opens a clause.
        "Melanie paints sunrises.",
        "deployment checklist for the payments service",
        "When deploying, always run the migrations first",
        "How to rotate the API keys",
        "Would-be founders pitch on Fridays",
        "",
        # Nothing but scaffolding: kept whole rather than embedded empty.
        "Why?",
        "What did?",
        "How long ago?",
        "???",
    ],
)
def test_text_that_is_no_question_or_only_scaffolding_stays_whole(text: str) -> None:
    assert question_content(text) == text


def test_the_content_of_a_name_free_question() -> None:
    asked = without_names("When did Caroline go to the LGBTQ support group?")
    assert question_content(asked) == "go to the support group"
    assert question_content(without_names("What did Caroline research?")) == "research"


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("vector_query", "names", "vector_query must be question or content"),
        ("content_vector", "min", "content_vector must be off, max or mean"),
        ("content_weight", 1.5, r"content_weight must be within \[0, 1\]"),
        ("content_weight", -0.1, r"content_weight must be within \[0, 1\]"),
    ],
)
def test_the_policy_names_the_field_and_the_rule(field: str, value: object, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        RankingPolicy(**{field: value})  # type: ignore[arg-type]


def test_both_directions_are_off_by_default() -> None:
    policy = RankingPolicy()
    assert (policy.vector_query, policy.content_vector) == ("question", "off")
