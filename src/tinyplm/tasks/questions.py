"""Questions from unlabelled text, for embedding students that will be asked questions.

A sentence encoder used for search embeds questions and ranks passages with them. A student
distilled on statements and passages only is never shown a question, so nothing holds its vectors
of questions in place: they drift while everything it was shown gets closer to the teacher. The
``questions`` source of ``task.train_texts`` gives it questions to learn the teacher's vectors of,
made from the corpus sentences (:func:`questions_of`), in two ways:

- **asked**: the questions the text itself asks (dialogue in novels: "What happened to you?"),
  each one opening with a capitalised wh-word or auxiliary ("What", "Is") found inside a
  sentence (up to its question mark, so not one holding a full stop, as "Mr." or "3.5");
- **made**: statements whose subject is a name turned into a factoid question by putting ``Who``
  or ``What`` in the subject's place ("Harold Godwinson was killed at Hastings ." ->
  "Who was killed at Hastings?"). Only the subject is replaced, so no verb needs inflecting and
  the question is as grammatical as its sentence (a possessive or a subject joined by "and" is
  not taken: "Who army was defeated?"); ``What`` where the name starts with ``The``,
  ``Who`` elsewhere (some of those are places: the teacher's vector of the question is the
  target either way, so the question needs to be question-shaped, not right). A capitalised
  sentence opening is a name only when one of its words is a proper word of the same text
  (:func:`proper_words`: written capitalised inside sentences, hardly ever in lower case), so
  "Wedding bells rang." or "Let him go." are not taken for names.

Deliberately plain rules, not a question-generation model: none is shipped with the data, and the
texts only have to be questions of the corpus' kind. The embedding task makes them only of
sentences that are neither evaluated nor held out, and leaves evaluated texts out of every source.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

#: Fewest and most words a question keeps (search questions are short; SQuAD's average ~11).
MIN_WORDS, MAX_WORDS = 4, 24

_WH = r"What|Who|Whom|Whose|When|Where|Which|Why|How"
_AUX = r"Is|Are|Was|Were|Do|Does|Did|Can|Could|Will|Would|Shall|Should|Has|Have|Had|May|Might|Must"
#: A question inside a sentence: a wh-word or an auxiliary at a word start, up to its question mark,
#: not across another sentence end or a quote.
_ASKED = re.compile(rf"(?<![\w'’])(?:{_WH}|{_AUX})\b[^.!?\"“”]*\?")
#: A statement opening with a name (capitalised words, with ``of``/``the``/``de`` between them, after
#: an optional ``The``), then a lower-case word (its verb), and ending with a full stop.
_NAME = r"[A-Z][\w'’.-]*"
_SUBJECT = re.compile(
    rf"^(?P<the>The )?(?P<name>{_NAME}(?: (?:of |the |de |von |van )?{_NAME}){{0,4}}) (?P<rest>[a-z][^?!]*?)\s*\.$"
)
#: A name ending in a possessive ("Harold's army"): the subject is what follows, not the name.
_POSSESSIVE = re.compile(r"['’]s?$")
#: Words after a name that make it part of a longer subject ("Harold and Edith were ...").
_JOINERS = frozenset({"and", "or", "nor", "&"})
#: First words that open a statement with no name as its subject (a pronoun, a conjunction, ...).
_NOT_NAMES = frozenset(
    "It He She They We I You This That These Those There Here In On At By For From With As After Before When While "
    "If But And Or So Then Although Though Because Since During Despite However Also A An His Her Its Their Our My "
    "Your One Some Many Most Such Each Every All Both No Not Only Yet What Who Which Where Why How The".split()
)


#: A word is proper when it is capitalised inside sentences at least this often, and this many
#: times more often than it is written in lower case.
PROPER_MIN, PROPER_RATIO = 2, 4
_WORD = re.compile(r"[A-Za-z][\w'’-]*")
#: A line's first word (of :data:`_WORD`) and what comes before it.
_FIRST_WORD = re.compile(r"^[^A-Za-z\n]*[A-Za-z][\w'’-]*", re.M)


def proper_words(sentences: Iterable[str]) -> frozenset[str]:
    """The words ``sentences`` write capitalised inside a sentence (not as its first word) at least
    :data:`PROPER_MIN` times and :data:`PROPER_RATIO` times as often as in lower case: names."""
    # The words are found by one pass of the word pattern over all the text, each sentence's first
    # word cut off, and counted by ``Counter`` (in C): counting them one by one in Python was most
    # of what making a corpus' questions took (docs/results/code-choices.md, "The test suite").
    text = _FIRST_WORD.sub("", "\n".join(s.replace("\n", " ") for s in sentences))
    capital: Counter[str] = Counter()
    lower: Counter[str] = Counter()
    for word, n in Counter(_WORD.findall(text)).items():
        (capital if word[0].isupper() else lower)[word.lower()] += n
    return frozenset(w for w, n in capital.items() if n >= PROPER_MIN and n >= PROPER_RATIO * lower[w])


def asked_questions(sentence: str) -> list[str]:
    """The questions ``sentence`` asks itself (each of :data:`MIN_WORDS` to :data:`MAX_WORDS` words)."""
    return [q for q in (" ".join(m.group().split()) for m in _ASKED.finditer(sentence)) if _sized(q)]


def made_question(sentence: str, proper: frozenset[str]) -> str | None:
    """``sentence`` as a who/what question about its subject, when its subject is a name (one of
    its words in ``proper``, lower-cased: :func:`proper_words`) and the question has
    :data:`MIN_WORDS` to :data:`MAX_WORDS` words; else None."""
    match = _SUBJECT.match(sentence)
    if match is None or match["name"].split()[0] in _NOT_NAMES or _POSSESSIVE.search(match["name"]):
        return None
    if match["rest"].split()[0] in _JOINERS:
        return None
    if not any(w.lower() in proper for w in _WORD.findall(match["name"])):
        return None
    question = f"{'What' if match['the'] else 'Who'} {match['rest']}?"
    return question if _sized(question) else None


def questions_of(sentences: Iterable[str]) -> list[str]:
    """The questions of ``sentences``, asked and made (module docstring), in order, each once."""
    return list(question_sources(sentences))


def question_sources(sentences: Iterable[str]) -> dict[str, int]:
    """Each question of ``sentences`` (as :func:`questions_of`, in order) -> the index in
    ``sentences`` of the first sentence it was asked in or made from."""
    sentences = list(sentences)
    proper = proper_words(sentences)
    out: dict[str, int] = {}
    for i, sentence in enumerate(sentences):
        # the patterns need a question mark, or a full stop at the end: most sentences are passed over
        asked = asked_questions(sentence) if "?" in sentence else []
        made = made_question(sentence, proper) if sentence.endswith((".", ".\n")) else None
        for question in [*asked, *([made] if made is not None else [])]:
            out.setdefault(question, i)
    return out


def _sized(question: str) -> bool:
    return MIN_WORDS <= len(question.split()) <= MAX_WORDS
