"""Questions made from unlabelled text (tinyplm.tasks.questions): the questions a text asks are found
inside its sentences, statements about a name become who/what questions with nothing else changed,
and sentences whose opening word is not a name give none."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tinyplm.tasks.questions import (
    MAX_WORDS,
    MIN_WORDS,
    asked_questions,
    made_question,
    proper_words,
    question_sources,
    questions_of,
)

#: A small text in which Harold and Hastings are written capitalised inside sentences (names) and
#: "wedding" and "let" in lower case (words).
TEXT = [
    "Harold Godwinson was killed at Hastings in the year 1066.",
    "The army of Harold met William near Hastings on the coast.",
    "They said Harold fought bravely all day at Hastings.",
    "The Battle of Hastings was fought on a Saturday in October.",
    "Wedding bells rang across the little town that morning.",
    "The wedding was held in the town and we let them dance.",
    "Let him go home before the rain begins tonight.",
    "“What happened to you?” said the old woman at the gate.",
    "He asked her: is it far to the river? She did not know.",
]


def test_statements_about_a_name_become_who_or_what_questions() -> None:
    proper = proper_words(TEXT)
    assert {"harold", "hastings"} <= proper and not {"wedding", "let", "army"} & proper
    assert made_question(TEXT[0], proper) == "Who was killed at Hastings in the year 1066?"
    assert made_question(TEXT[3], proper) == "What was fought on a Saturday in October?"
    # a capitalised opening that is a word, not a name; a pronoun; an article before a common noun
    assert made_question(TEXT[4], proper) is None
    assert made_question(TEXT[6], proper) is None
    assert made_question(TEXT[2], proper) is None
    assert made_question(TEXT[5], proper) is None
    # a possessive or a joined subject: only part of the subject is the name
    assert made_question("Harold's army was beaten at Hastings that day.", proper) is None
    assert made_question("Harold and his brothers were killed at Hastings.", proper) is None


def test_the_questions_a_text_asks_are_found_inside_its_sentences() -> None:
    assert asked_questions(TEXT[7]) == ["What happened to you?"]
    assert asked_questions("Why not?") == []  # too short to be a search question
    assert asked_questions("He knew how it ended. Then he left.") == []  # no question mark: no question
    questions = questions_of(TEXT + TEXT)
    assert questions == ["Who was killed at Hastings in the year 1066?", "What was fought on a Saturday in October?",
                         "What happened to you?"]


_word = st.text(alphabet=st.characters(categories=["L", "Nd"]), min_size=1, max_size=9)
_sentence = st.lists(_word, min_size=1, max_size=40).map(" ".join).flatmap(
    lambda s: st.sampled_from([s, f"{s}.", f"{s}?", f"{s}!", f"What {s}?", f"The {s} was here."]))


@given(st.lists(_sentence, max_size=12))
@settings(max_examples=150, deadline=None)
def test_every_question_is_a_sized_question_made_of_its_sentence_words(sentences: list[str]) -> None:
    words = {w for s in sentences for w in s.replace("?", " ").replace(".", " ").split()}
    questions = questions_of(sentences)
    assert len(questions) == len(set(questions))
    for q in questions:
        assert q.endswith("?") and MIN_WORDS <= len(q.split()) <= MAX_WORDS
        assert set(q.rstrip("?").split()) - {"Who", "What"} <= words

    sources = question_sources(sentences)
    assert list(sources) == questions
    for q, i in sources.items():  # the first sentence it was asked in or made from
        assert q in asked_questions(sentences[i]) or q == made_question(sentences[i], proper_words(sentences))


def _proper_one_by_one(sentences: list[str]) -> frozenset[str]:
    """The rule of :func:`proper_words` counted word by word (what it did before it counted in one pass)."""
    import re

    capital: dict[str, int] = {}
    lower: dict[str, int] = {}
    for sentence in sentences:
        for word in re.findall(r"[A-Za-z][\w'’-]*", sentence)[1:]:
            counts = capital if word[0].isupper() else lower
            counts[word.lower()] = counts.get(word.lower(), 0) + 1
    return frozenset(w for w, n in capital.items() if n >= 2 and n >= 4 * lower.get(w, 0))


#: Sentences of few letters (so words repeat and reach the counts), with what can end or open a word:
#: apostrophes, hyphens, digits, accents, quotes and line breaks.
_texty = st.lists(st.text(alphabet="aAbBcC '’-1é\"\n.", max_size=30), max_size=15)


@given(_texty)
@settings(max_examples=200, deadline=None)
def test_proper_words_counts_each_sentences_words_after_its_first(sentences: list[str]) -> None:
    assert proper_words(sentences) == _proper_one_by_one(sentences)
    assert proper_words(iter(sentences)) == proper_words(sentences)  # any iterable, read once
