"""The open reading keeps non-ASCII words whole (PartiPrompts has "Salvador Dalí" and
"Dois Irmãos"): an accented letter is part of its word, not a token of its own."""

from __future__ import annotations

import pytest

from evoharness.runtime.reading import read_open


@pytest.mark.parametrize(
    ("prompt", "noun"),
    [
        ("Salvador Dalí with a robotic half face", "salvador dalí"),
        ("a café on a street", "café"),
        ("два кота", "два кота"),
    ],
)
def test_accented_and_non_latin_words_stay_whole(prompt: str, noun: str) -> None:
    nouns = [o.noun for o in read_open(prompt).objects]
    assert noun in nouns, nouns
    assert not any(len(w) == 1 and not w.isascii() for n in nouns for w in n.split()), nouns
