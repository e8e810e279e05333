"""The simulator's "text encoder": reads a prompt into object phrases, relations and texts.

Rules (the embedded world's model of a text encoder, ``docs/architecture.md``, "The embedded
CPU world"):

- Lower-case, CLIP-like tokens: words (letters/digits, with an inner apostrophe) and single
  punctuation marks; a quoted string contributes its words as tokens. Only the first
  ``max_tokens - 2`` content tokens are read (77 incl. CLIP's start/end tokens); anything
  named past the cut is not drawn (it is reported in ``Reading.dropped``).
- Clauses are separated by ``.`` ``;`` and newlines — not by commas or "and".
- An object phrase is: optional count (digit, number word, "a"/"an"), optional colour
  texture and shape word(s) (``vocab.TEXTURE_WORDS``: "wooden", "striped", …;
  ``vocab.SHAPE_WORDS``: "round", "square", …), then a class name (singular or plural; multi-word names like "wine glass"). Words
  the reader does not know are skipped and keep the pending count/colour.
- "no X" / "without X" marks X negated. Relations: "left of", "right of", "above", "below"
  (also "to the left of", "on the right of", "on top of" = above, "under"/"beneath" =
  below; proximity: "next to", "beside", "on (the) side of", "by the side of" = next to,
  "near", "close to" = near; depth: "behind" (also "hidden by", "partially hidden by") and
  "in front of") between the previous object and the next one. "in the background of" is
  not read: it is as often a scene ("a dog in the background of a park") as a relation.
- Text: a double-quoted string (straight or curly quotes) is quoted text; words after
  "saying" / "that says" up to the next comma or clause end are unquoted text.
- Reference mentions (issue 32; the mention convention of reference-conditioned generators'
  prompts, as ``evoharness.agent.program.mentions_reference`` checks it): "image N",
  "reference N", "reference image N", "image #N" (N a digit or a number word) are read as a
  mention of the program's N-th reference, never as a count. A mention binds the object
  phrase it follows in the same clause when at most ``_BIND_GAP`` connector words
  (``_CONNECTORS``: "from", "in", "of", "the", a comma, a bracket, …) stand between ("the mug
  from image 1", "the cat in image 2", "the car (reference 3)"), and a possessive mention
  ("image 3's car") binds the next object phrase. ``ObjectPhrase.reference`` holds the bound
  reference's 1-based number.

Only numpy-free standard library here; the generator imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from evoharness.vocab import COLORS, NAMES, PLURALS, SHAPE_WORDS, TEXTURE_WORDS, WORD_NUMBERS

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")
_QUOTE = re.compile(r"[\"“”]([^\"“”]*)[\"“”]")
_CLAUSE_BREAK = {".", ";", "\n"}

# class lookup: tuple of words → (class, plural?)
_NAMES: dict[tuple[str, ...], tuple[str, bool]] = {}
for _w, _c in NAMES.items():
    _NAMES[tuple(_w.split())] = (_c, False)
for _p, _c in PLURALS.items():
    _NAMES.setdefault(tuple(_p.split()), (_c, True))
_MAX_NAME = max(len(k) for k in _NAMES)

_RELATIONS: list[tuple[tuple[str, ...], str]] = sorted(
    [
        (("to", "the", "left", "of"), "left of"),
        (("on", "the", "left", "of"), "left of"),
        (("left", "of"), "left of"),
        (("to", "the", "right", "of"), "right of"),
        (("on", "the", "right", "of"), "right of"),
        (("right", "of"), "right of"),
        (("on", "top", "of"), "above"),
        (("above",), "above"),
        (("below",), "below"),
        (("under",), "below"),
        (("beneath",), "below"),
        (("underneath",), "below"),
        # proximity (``tasks.models.PROXIMITY_RELATIONS``), canonical names as in
        # ``evoharness.runtime.lexicon.RELATION_PHRASES``
        (("next", "to"), "next to"),
        (("beside",), "next to"),
        (("on", "side", "of"), "next to"),
        (("on", "the", "side", "of"), "next to"),
        (("by", "the", "side", "of"), "next to"),
        (("near",), "near"),
        (("close", "to"), "near"),
        # depth (T2I-CompBench's 3D-spatial words, ``tasks.models.DEPTH_RELATIONS``; names as
        # in ``evoharness.runtime.lexicon.RELATION_PHRASES``)
        (("behind",), "behind"),
        (("hidden", "by"), "behind"),
        (("partially", "hidden", "by"), "behind"),
        (("partly", "hidden", "by"), "behind"),
        (("in", "front", "of"), "in front of"),
    ],
    key=lambda r: -len(r[0]),
)


@dataclass
class Token:
    """One token: ``text`` (lower case), ``kind`` ("word", "punct", "quoted", "break"),
    ``quote`` (the whole original quoted string, on its first token only)."""

    text: str
    kind: str
    quote: str | None = None


@dataclass
class ObjectPhrase:
    """One object phrase read from the prompt."""

    cls: str
    count: int | None  # None: not stated (singular → 1, plural → a few)
    digit: bool
    plural: bool
    colors: list[str]
    negated: bool
    clause: int
    start: int  # token index of the class name's first word
    end: int  # token index after the class name
    textures: list[str] = field(default_factory=list)  # canonical ``vocab.TEXTURES`` names
    shapes: list[str] = field(default_factory=list)  # canonical ``vocab.SHAPES`` names
    #: the 1-based number of the program reference this phrase is bound to ("the mug from
    #: image 1"); None: not bound
    reference: int | None = None


@dataclass
class Relation:
    """``subject`` (index into objects) is ``relation`` of ``target``."""

    subject: int
    relation: str
    target: int


@dataclass
class TextItem:
    """Text to render: ``text`` (original case), ``quoted`` or after "saying"."""

    text: str
    quoted: bool
    end: int


@dataclass
class Reading:
    """What the reader took from a prompt (only the read part) and what it dropped."""

    objects: list[ObjectPhrase] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    texts: list[TextItem] = field(default_factory=list)
    n_tokens: int = 0
    n_read: int = 0
    dropped: list[str] = field(default_factory=list)


#: Words that introduce a reference mention ("image 2", "reference 2", "img 2").
_MENTION_WORDS = frozenset({"image", "reference", "img", "ref"})
#: Words (and marks) that may stand between an object phrase and the mention binding it.
_CONNECTORS = frozenset(
    {"from", "in", "of", "on", "shown", "seen", "as", "like", "the", "that", "is", "see"}
    | {"(", ")", "[", "]", ",", "-", "–", "—", ":", "#", "reference"}
)
_BIND_GAP = 3
_POSSESSIVE = re.compile(r"^(\d+)'s$")


def _mention(words: list[str], i: int) -> tuple[int, int, bool] | None:
    """``(reference number, tokens used, possessive)`` when a reference mention starts at
    ``words[i]`` ("image 2", "reference #2", "image 3's"), else None."""
    if words[i] not in _MENTION_WORDS:
        return None
    j = i + 1
    if j < len(words) and words[j] == "#":
        j += 1
    if j >= len(words):
        return None
    w = words[j]
    m = _POSSESSIVE.match(w)
    if m:
        n, possessive = int(m.group(1)), True
    elif w.isdigit():
        n, possessive = int(w), False
    elif w in WORD_NUMBERS:
        n, possessive = WORD_NUMBERS[w], False
    else:
        return None
    if n < 1:
        return None
    return n, j + 1 - i, possessive


def tokenize(prompt: str) -> list[Token]:
    """Tokens of ``prompt`` (clause breaks from newlines are kind "break", not counted)."""
    out: list[Token] = []
    pos = 0
    lines = prompt.split("\n")
    for li, line in enumerate(lines):
        if li:
            out.append(Token("\n", "break"))
        pos = 0
        for m in _QUOTE.finditer(line):
            out.extend(_plain_tokens(line[pos : m.start()]))
            words = _TOKEN.findall(m.group(1).lower())
            for wi, w in enumerate(words):
                out.append(Token(w, "quoted", m.group(1) if wi == 0 else None))
            pos = m.end()
        out.extend(_plain_tokens(line[pos:]))
    return out


def _plain_tokens(s: str) -> list[Token]:
    return [
        Token(t, "word" if t[0].isalnum() else "punct")
        for t in _TOKEN.findall(s.lower())
        if t not in ('"', "“", "”")
    ]


def count_tokens(prompt: str) -> int:
    """Number of content tokens the reader sees (CLIP adds 2 start/end tokens on top)."""
    return sum(1 for t in tokenize(prompt) if t.kind != "break")


def class_names_in(text: str) -> set[str]:
    """Every class named anywhere in ``text`` (singular or plural), e.g. for negative prompts."""
    words = [t.text for t in tokenize(text) if t.kind == "word"]
    found: set[str] = set()
    for i in range(len(words)):
        for n in range(_MAX_NAME, 0, -1):
            key = tuple(words[i : i + n])
            if len(key) == n and key in _NAMES:
                found.add(_NAMES[key][0])
                break
    return found


def read_prompt(prompt: str, max_tokens: int = 77) -> Reading:
    """Read ``prompt`` as the simulator's text encoder does (see the module docstring)."""
    toks = tokenize(prompt)
    limit = max_tokens - 2
    # index of the first token past the cut (counting content tokens only)
    cut = len(toks)
    n = 0
    for i, t in enumerate(toks):
        if t.kind == "break":
            continue
        if n == limit:
            cut = i
            break
        n += 1
    reading = Reading(n_tokens=count_tokens(prompt), n_read=min(limit, count_tokens(prompt)))
    words = [t.text for t in toks]
    clause = 0
    count: int | None = None
    digit = False
    colors: list[str] = []
    textures: list[str] = []
    shapes: list[str] = []
    negated = False
    rel_pending: tuple[int, str] | None = None
    ref_pending: int | None = None  # a possessive mention ("image 3's") binds the next object
    all_objs: list[ObjectPhrase] = []
    all_rels: list[Relation] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind == "break" or t.text in _CLAUSE_BREAK:
            clause += 1
            count, digit, colors, negated, rel_pending = None, False, [], False, None
            textures, shapes, ref_pending = [], [], None
            i += 1
            continue
        if t.kind == "quoted":
            j = i
            while j + 1 < len(toks) and toks[j + 1].kind == "quoted" and toks[j + 1].quote is None:
                j += 1
            if t.quote is not None and i < cut:
                text = t.quote if j < cut else " ".join(x.text for x in toks[i:cut])
                reading.texts.append(TextItem(text.strip(), True, j + 1))
            i = j + 1
            continue
        w = t.text
        if w == "saying" or (w == "says" and i > 0 and words[i - 1] == "that"):
            j = i + 1
            if j < len(toks) and toks[j].kind != "quoted":
                parts: list[str] = []
                while (
                    j < len(toks)
                    and toks[j].kind == "word"
                    and toks[j].text not in _CLAUSE_BREAK
                    and len(parts) < 6
                ):
                    parts.append(toks[j].text)
                    j += 1
                parts = [p for k, p in enumerate(parts) if k < cut - i - 1]
                if parts and i < cut:
                    reading.texts.append(TextItem(" ".join(parts).upper(), False, j))
                i = j
                continue
        mention = _mention(words, i) if t.kind == "word" else None
        if mention is not None:
            number, used, possessive = mention
            if possessive:
                ref_pending = number
            elif all_objs and all_objs[-1].clause == clause and all_objs[-1].reference is None:
                gap = toks[all_objs[-1].end : i]
                if len(gap) <= _BIND_GAP and all(g.text in _CONNECTORS for g in gap):
                    all_objs[-1].reference = number
            i += used
            continue
        rel = _match_relation(words, i)
        if rel is not None and all_objs:
            rel_pending = (len(all_objs) - 1, rel[1])
            i += len(rel[0])
            continue
        name = _match_name(words, toks, i)
        if name is not None and w in COLORS and _match_name(words, toks, i + 1) is not None:
            name = None  # "an orange cat": colour, not the fruit
        if name is not None:
            (cls, is_plural), length = name
            obj = ObjectPhrase(
                cls=cls,
                count=count if count is not None else (None if is_plural else 1),
                digit=digit,
                plural=is_plural,
                colors=list(colors),
                negated=negated,
                clause=clause,
                start=i,
                end=i + length,
                textures=list(textures),
                shapes=list(shapes),
                reference=ref_pending,
            )
            ref_pending = None
            all_objs.append(obj)
            if rel_pending is not None:
                all_rels.append(Relation(rel_pending[0], rel_pending[1], len(all_objs) - 1))
                rel_pending = None
            count, digit, colors, negated = None, False, [], False
            textures, shapes = [], []
            i += length
            continue
        if w in ("a", "an", "one"):
            count, digit = 1, False
        elif w in WORD_NUMBERS:
            count, digit = WORD_NUMBERS[w], False
        elif w.isdigit():
            count, digit = int(w), True
        elif w in COLORS:
            colors.append(w)
        elif w in TEXTURE_WORDS:
            textures.append(TEXTURE_WORDS[w])
        elif w in SHAPE_WORDS:
            shapes.append(SHAPE_WORDS[w])
        elif w in ("no", "without"):
            negated = True
        i += 1
    keep: dict[int, int] = {}
    for k, o in enumerate(all_objs):
        if o.end <= cut:
            keep[k] = len(reading.objects)
            reading.objects.append(o)
        else:
            reading.dropped.append(o.cls)
    for r in all_rels:
        if r.subject in keep and r.target in keep:
            reading.relations.append(Relation(keep[r.subject], r.relation, keep[r.target]))
    return reading


#: Palette and style words (``palette_of``): whole-image colour styles → the colours they
#: impose. "black and white" counts only when no object name follows it (then it is the
#: object's colour: "a black and white cat").
MONOCHROME_WORDS = frozenset(
    {"monochrome", "monochromatic", "grayscale", "greyscale", "desaturated", "colorless"}
)
MONOCHROME_PALETTE = ("black", "white")
SEPIA_PALETTE = ("brown",)
#: "<colour> tones", "<colour> palette", …: the colour word is imposed on the whole image.
PALETTE_NOUNS = frozenset(
    {"tones", "tone", "tint", "tinted", "palette", "hues", "hue", "duotone", "wash", "grading"}
)


def palette_of(prompt: str, max_tokens: int = 77) -> tuple[str, ...]:
    """The colours a whole-image palette or style in the read part of ``prompt`` imposes
    (sorted, empty when none): "monochrome", "grayscale", "black and white" (not followed by
    an object name) → black and white; "sepia" → brown; "shades of C", "C tones", "C tint",
    "C palette", "C hues", "C color grading", "C color scheme" → C (a ``vocab.COLORS`` word).
    Words past the token limit (``max_tokens - 2`` content tokens) are not read."""
    toks = [t for t in tokenize(prompt) if t.kind != "break"][: max(0, max_tokens - 2)]
    words = [t.text for t in toks]
    out: set[str] = set()
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if w in MONOCHROME_WORDS:
            out.update(MONOCHROME_PALETTE)
        elif w == "sepia":
            out.update(SEPIA_PALETTE)
        elif (
            w == "black"
            and words[i + 1 : i + 3] == ["and", "white"]
            and _match_name(words, toks, i + 3) is None
        ):
            out.update(MONOCHROME_PALETTE)
        elif w in COLORS and (
            nxt in PALETTE_NOUNS
            or words[i + 1 : i + 3] in (["color", "scheme"], ["colour", "scheme"])
            or words[i + 1 : i + 3] in (["color", "grading"], ["colour", "grading"])
        ):
            out.add(w)
        elif w == "shades" and nxt == "of" and i + 2 < len(words) and words[i + 2] in COLORS:
            out.add(words[i + 2])
    return tuple(sorted(out))


def _match_relation(words: list[str], i: int) -> tuple[tuple[str, ...], str] | None:
    for pat, rel in _RELATIONS:
        if tuple(words[i : i + len(pat)]) == pat:
            return pat, rel
    return None


def _match_name(words: list[str], toks: list[Token], i: int) -> tuple[tuple[str, bool], int] | None:
    for n in range(_MAX_NAME, 0, -1):
        key = tuple(words[i : i + n])
        if len(key) == n and key in _NAMES and all(t.kind == "word" for t in toks[i : i + n]):
            return _NAMES[key], n
    return None
