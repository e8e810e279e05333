"""The embedded rule-based agent backend: finds what a prompt asks to look up, searches it,
and writes the program with the answers filled in.

Lookups it recognises (English, case-insensitive):

- **colour**: ``<noun> in the colour of <thing>`` (also ``color``, ``the same colour as``,
  ``coloured like``, ``painted in the colour of``) → ``search("colour of <thing>")``; the
  first hit that names ``<thing>``'s head word and one of the world's colour names
  (``vocab.COLORS``) gives the colour, and the phrase becomes ``<colour> <noun>``.
- **count**: ``as many <objects> as <a thing> has <parts>`` and ``as many <objects> as there
  are <parts> on <a thing>`` → ``search("how many <parts> does <a thing> have")``; the first
  hit naming the thing's head word and the parts with a number gives it, and the phrase
  becomes ``<number word> <objects>``.
- **used with**: ``the <object|thing|tool|item> (that is) used with <a thing>`` →
  ``search("object used with <a thing>")``; the first world class (``vocab.NAMES``) in a hit
  that names the thing and is not the thing becomes ``a <class>``.

A lookup whose search finds nothing usable leaves its phrase as it was (the rationale says
so). A prompt without lookups gets a program with the prompt unchanged and no tool call.

**References for materials and patterns** (with ``image_search`` offered): text-to-image
models bind a material or pattern word ("a wooden chair", "a striped cat";
``vocab.TEXTURES``) to its object poorly — T2I-CompBench's texture category (Huang et al.
2023) — and a reference image of the object in that material shows it (GenEvolve's
``image_search``; retrieval-augmented generation, Re-Imagen, Chen et al. 2022). For each
singular object phrase with such a word (``find_textured``: an article, then colour,
texture and colour words in any order, then a noun the world names), in prompt order, the
planner calls ``image_search("<the phrase without its article>")`` and takes the first hit
whose caption is exactly such a phrase of the same object and texture (``pick_reference``):
the phrase's colour if it names one, any colour if it does not, and nothing more (a caption
adding a pose, another object or another texture is not what was asked). The phrase becomes
"the <phrase> from image k", k numbered after the request references the program carries.
At most ``max_references`` references in all; none is retrieved when the request's own
references pass through, or for a phrase the prompt already binds to an image.

**References of the request** (issue 32; shown to the agent as ``IMG_001`` … in request
order, ``task.images``): the program carries each one the prompt mentions, by the
reference-conditioned generators' convention ("the cup from image 1", "image 3's car",
"reference 2": ``program.mentions_reference``), with the role ``subject``, in request
order. A reference the prompt never mentions is left out — it binds to nothing, and a
generator given it would ignore it or paste it somewhere — and the mentions of the others
are renumbered to the program's order (the rationale says so). When the mentioned
references are more than ``max_references`` the program carries none and the request's
references pass through the runtime unchanged (noted). The planner selects no skills.
Deterministic: the same prompt and observations give the same turns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evoharness import vocab
from evoharness.agent.loop import AgentTask, AgentTurn, FinalAnswer, ToolCall
from evoharness.agent.program import mentions_reference

_STOP = r"(?=\s*(?:[,.;:!?]|$)|\s+(?:and|with|on|next|beside|under|above|below|near|in|behind|to|at|left|right|over|inside|between|holding|sitting|standing)\b)"
_THING = r"(?P<thing>(?:(?:a|an|the)\s+)?[a-z][a-z'-]*(?:\s+[a-z][a-z'-]*){0,3}?)"
_COLOUR = re.compile(
    r"(?:\s+(?:(?:painted\s+)?in|with|of)\s+the\s+(?:same\s+)?colou?r\s+(?:of|as)"
    r"|\s+(?:in\s+)?the\s+same\s+colou?r\s+as|\s+colou?red\s+like)\s+" + _THING + _STOP,
    re.IGNORECASE,
)
_COUNT = re.compile(
    r"\bas\s+many\s+(?P<objects>[a-z][a-z -]*?)\s+as\s+(?:"
    r"(?P<thing>(?:a|an|the)\s+[a-z][a-z' -]*?)\s+(?:has|have)\s+(?P<parts>[a-z]+)"
    r"|there\s+are\s+(?P<parts2>[a-z]+)\s+(?:on|in)\s+(?P<thing2>(?:a|an|the)\s+[a-z][a-z' -]*?)"
    r")" + _STOP,
    re.IGNORECASE,
)
_USED = re.compile(
    r"\b(?:the|an?)\s+(?:object|thing|tool|item)\s+(?:that\s+is\s+|you\s+)?used\s+with\s+"
    + _THING
    + _STOP,
    re.IGNORECASE,
)
_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.IGNORECASE)
_NOUN_BEFORE = re.compile(r"(?P<art>\b(?:a|an|the|one)\s+)?(?P<noun>[a-z][a-z-]*)\s*$", re.I)
_MENTION = re.compile(vocab.REFERENCE_MENTION, re.I)
_REQUEST_ID = re.compile(r"^IMG_(\d+)$", re.I)
_TEXTURED = re.compile(
    r"\b(?P<art>a|an|the|one)\s+(?P<mods>(?:(?:"
    + "|".join(sorted((*vocab.COLORS, *vocab.TEXTURE_WORDS), key=len, reverse=True))
    + r")\s+)+)(?P<noun>"
    + "|".join(re.escape(n) for n in sorted(vocab.NAMES, key=len, reverse=True))
    + r")\b(?!\s+(?:from|in|of)\s+(?:reference\s+)?(?:image|reference)\b)(?!'s)",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\b(\d{1,2}|" + "|".join(vocab.WORD_NUMBERS) + r")\b", re.IGNORECASE)


@dataclass(frozen=True)
class Lookup:
    """One thing to look up: ``kind`` (colour, count, used_with), the prompt span
    ``[start, end)`` it replaces, the search ``query`` and the words it needs."""

    kind: str
    start: int
    end: int
    query: str
    thing: str
    noun: str = ""
    article: str = ""
    parts: str = ""


def _head(thing: str) -> str:
    words = _ARTICLE.sub("", thing).split()
    return words[-1].lower() if words else ""


def find_lookups(prompt: str) -> list[Lookup]:
    """The lookups ``prompt`` asks for, in prompt order, non-overlapping."""
    found: list[Lookup] = []
    for m in _COLOUR.finditer(prompt):
        before = _NOUN_BEFORE.search(prompt[: m.start()])
        if before is None:
            continue
        thing = m.group("thing").strip()
        found.append(
            Lookup(
                "colour",
                before.start(),
                m.end(),
                f"colour of {thing}",
                thing,
                noun=before.group("noun"),
                article=(before.group("art") or "").strip(),
            )
        )
    for m in _COUNT.finditer(prompt):
        thing = (m.group("thing") or m.group("thing2")).strip()
        parts = (m.group("parts") or m.group("parts2")).lower()
        found.append(
            Lookup(
                "count",
                m.start(),
                m.end(),
                f"how many {parts} does {thing} have",
                thing,
                noun=m.group("objects").strip(),
                parts=parts,
            )
        )
    for m in _USED.finditer(prompt):
        thing = m.group("thing").strip()
        found.append(Lookup("used_with", m.start(), m.end(), f"object used with {thing}", thing))
    found.sort(key=lambda lk: lk.start)
    kept: list[Lookup] = []
    for lk in found:
        if not kept or lk.start >= kept[-1].end:
            kept.append(lk)
    return kept


@dataclass(frozen=True)
class Textured:
    """A singular object phrase with a material or pattern word: the prompt span ``[start,
    end)``, its ``noun`` as written, the world ``cls`` it names, its canonical ``texture``
    (``vocab.TEXTURES``) and ``color`` (a ``vocab.COLORS`` name or None)."""

    start: int
    end: int
    noun: str
    cls: str
    texture: str
    color: str | None

    def words(self, prompt: str) -> str:
        """The phrase without its article: ``"wooden chair"``."""
        m = _TEXTURED.match(prompt, self.start)
        assert m is not None
        return f"{m.group('mods').strip()} {m.group('noun')}".lower()


def _textured(m: re.Match[str]) -> Textured | None:
    mods = m.group("mods").lower().split()
    textures = {vocab.TEXTURE_WORDS[w] for w in mods if w in vocab.TEXTURE_WORDS}
    colours = {w for w in mods if w in vocab.COLORS}
    if len(textures) != 1 or len(colours) > 1:
        return None
    noun = m.group("noun")
    return Textured(
        m.start(),
        m.end(),
        noun,
        vocab.NAMES[noun.lower()],
        textures.pop(),
        colours.pop() if colours else None,
    )


#: Quoted text (to be drawn as written, never rewritten): straight or curly quotes.
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”|‘[^’]*’|(?<!\w)\'[^\']*\'(?!\w)')
#: A negation cue: the phrase after it (in its clause) is what the prompt does *not* want.
_NEGATION = re.compile(r"\b(?:no|not|without|never|nor|except|minus)\b", re.IGNORECASE)
#: Where a clause ends, for a negation's scope.
_CLAUSE_END = re.compile(r"[,.;:!?]|\b(?:and|but|while)\b", re.IGNORECASE)


def _negated(prompt: str, start: int) -> bool:
    """Whether a negation cue stands between the last clause boundary before ``start`` and
    ``start`` ("a chair without a striped cat", "a chair, no striped cat")."""
    head = prompt[:start]
    ends = [m.end() for m in _CLAUSE_END.finditer(head)]
    return _NEGATION.search(head, ends[-1] if ends else 0) is not None


def find_textured(prompt: str) -> list[Textured]:
    """The singular object phrases of ``prompt`` with one material or pattern word and at most
    one colour ("a wooden chair", "the red striped cat"), in prompt order. Not among them:
    phrases the prompt already binds to an image ("the cup from image 1", "image 2's cat"),
    phrases inside quotes (text to draw) and negated ones ("without a striped cat")."""
    quoted = [(m.start(), m.end()) for m in _QUOTED.finditer(prompt)]
    out = []
    for m in _TEXTURED.finditer(prompt):
        t = _textured(m)
        if t is None or _negated(prompt, m.start()):
            continue
        if any(a <= m.start() < b for a, b in quoted):
            continue
        out.append(t)
    return out


def pick_reference(phrase: Textured, observation: Any) -> str | None:
    """The ``img_id`` of the first ``image_search`` hit in ``observation`` whose caption is
    exactly a phrase of ``phrase``'s object and texture (its colour too, when it names one;
    module docstring), or None."""
    if not isinstance(observation, list):
        return None
    for hit in observation:
        if not isinstance(hit, dict):
            continue
        img_id, caption = hit.get("img_id"), hit.get("caption")
        if not isinstance(img_id, str) or not isinstance(caption, str):
            continue
        m = _TEXTURED.fullmatch(caption.strip().rstrip("."))
        t = _textured(m) if m is not None else None
        if (
            t is not None
            and (t.cls, t.texture) == (phrase.cls, phrase.texture)
            and phrase.color in (None, t.color)
        ):
            return img_id
    return None


def _hit_texts(observation: Any) -> list[str]:
    if not isinstance(observation, list):
        return []
    return [
        h["text"] for h in observation if isinstance(h, dict) and isinstance(h.get("text"), str)
    ]


def _word(word: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}s?(?!\w)", text, re.IGNORECASE) is not None


def answer(lookup: Lookup, observation: Any) -> str | None:
    """The replacement text for ``lookup`` from a search ``observation``, or None."""
    head = _head(lookup.thing)
    for text in _hit_texts(observation):
        if not _word(head, text):
            continue
        if lookup.kind == "colour":
            colours = [
                (m.start(), c)
                for c in vocab.COLORS
                for m in re.finditer(rf"(?<!\w){c}(?!\w)", text, re.IGNORECASE)
            ]
            if colours:
                colour = min(colours)[1]
                art = lookup.article.lower()
                if art in ("a", "an"):
                    art = vocab.article(colour)
                return f"{art} {colour} {lookup.noun}".strip()
        elif lookup.kind == "count":
            if not _word(lookup.parts.rstrip("s"), text):
                continue
            m = _NUMBER.search(text)
            if m:
                tok = m.group(1).lower()
                n = int(tok) if tok.isdigit() else vocab.WORD_NUMBERS[tok]
                return f"{vocab.NUMBER_WORDS.get(n, str(n))} {lookup.noun}"
        else:
            thing = _ARTICLE.sub("", lookup.thing).lower()
            names = sorted(vocab.NAMES, key=len, reverse=True)
            for name in names:
                if (
                    name != thing
                    and vocab.NAMES[name] != vocab.NAMES.get(thing)
                    and _word(name, text)
                ):
                    cls = vocab.NAMES[name]
                    return f"{'an' if cls[0] in 'aeiou' else 'a'} {cls}"
    return None


def splice(prompt: str, spans: Sequence[tuple[int, int, str]]) -> str:
    """``prompt`` with each span ``(start, end, text)`` — ``[start, end)`` replaced by
    ``text`` — applied; the spans may come in any order and must not overlap (``ValueError``
    naming the two that do)."""
    out, pos = [], 0
    for start, end, text in sorted(spans):
        if start < pos:
            raise ValueError(f"span [{start}, {end}) overlaps the one ending at {pos}")
        out += [prompt[pos:start], text]
        pos = end
    return "".join(out) + prompt[pos:]


class RulePlanner:
    """``AgentBackend``: the embedded rule-based planner (see the module docstring)."""

    name = "rule"

    def next_turn(self, task: AgentTask, trajectory: Sequence[Mapping[str, Any]]) -> AgentTurn:
        """One search per lookup, in prompt order, then one image search per textured
        phrase the reference budget allows, then the final program."""
        lookups = find_lookups(task.prompt)
        offered = {t.name for t in task.tools}
        can_search = "search" in offered
        calls = [r for r in trajectory if r.get("type") == "tool_call"]
        searches = [r for r in calls if r.get("tool") == "search"]
        if can_search and len(searches) < len(lookups):
            lk = lookups[len(searches)]
            return AgentTurn(ToolCall("search", {"query": lk.query}, f"call_{len(calls) + 1}"))
        textured = _free_of(find_textured(task.prompt), lookups)
        image_searches = [r for r in calls if r.get("tool") == "image_search"]
        budget = task.max_references - len(mentioned_references(task)) if textured else 0
        if (
            "image_search" in offered
            and not passes_through(task)
            and not missing_mentions(task)
            and len(image_searches) < min(len(textured), budget)
        ):
            tx = textured[len(image_searches)]
            query = tx.words(task.prompt)
            return AgentTurn(ToolCall("image_search", {"query": query}, f"call_{len(calls) + 1}"))
        spans: list[tuple[int, int, str]] = []
        notes: list[str] = []
        for i, lk in enumerate(lookups):
            got = answer(lk, searches[i].get("observation")) if i < len(searches) else None
            if got is None:
                why = "no search tool" if not can_search else "no usable hit"
                notes.append(f"{lk.kind} of {lk.thing!r}: {why}, phrase kept")
            else:
                spans.append((lk.start, lk.end, got))
                notes.append(f"{lk.kind} of {lk.thing!r} -> {got!r}")
        retrieved: list[str] = []
        for tx, call in zip(textured, image_searches, strict=False):
            words = tx.words(task.prompt)
            img_id = pick_reference(tx, call.get("observation"))
            if img_id is None:
                notes.append(f"no reference shows {words!r}: phrase kept")
                continue
            retrieved.append(img_id)
            spans.append((tx.start, tx.end, f"the {words} from image \x00{len(retrieved)}\x00"))
            notes.append(f"{words!r} -> {img_id}")
        if "image_search" in offered and len(image_searches) < len(textured):
            why = (
                "the prompt mentions an image the request does not carry"
                if missing_mentions(task)
                else "the reference budget is spent or the request's references pass through"
            )
            notes.append(
                f"{len(textured) - len(image_searches)} textured phrase(s) without a "
                f"reference: {why}"
            )
        gen_prompt, refs = bind_references(splice(task.prompt, spans), task, notes)
        gen_prompt = re.sub(
            "\x00(\\d+)\x00", lambda m: str(len(refs) + int(m.group(1))), gen_prompt
        )
        refs += [{"img_id": i, "role": "subject"} for i in retrieved]
        program = {
            "gen_prompt": gen_prompt,
            "reference_images": refs,
            "selected_skills": [],
            "rationale": "; ".join(notes) or "nothing to look up",
        }
        return AgentTurn(FinalAnswer(json.dumps(program)))


def _free_of(textured: list[Textured], lookups: list[Lookup]) -> list[Textured]:
    """The textured phrases that overlap no lookup's span (a lookup rewrites its span)."""
    return [t for t in textured if all(t.end <= lk.start or t.start >= lk.end for lk in lookups)]


def _request(task: AgentTask) -> list[tuple[int, str]]:
    """The request's references as ``(number, img_id)``, in order."""
    return sorted(
        (int(m.group(1)), img_id)
        for img_id in task.images
        if (m := _REQUEST_ID.match(img_id)) is not None
    )


def mentioned_references(task: AgentTask) -> list[tuple[int, str]]:
    """The request's references that ``task.prompt`` mentions ("image 2"), in order."""
    return [(n, i) for n, i in _request(task) if mentions_reference(task.prompt, n)]


def missing_mentions(task: AgentTask) -> list[int]:
    """The image numbers ``task.prompt`` mentions ("image 3") that the request does not
    carry, in order (a retrieved reference numbered after the request's would take one)."""
    return _missing(task.prompt, _request(task))


def _missing(prompt: str, request: list[tuple[int, str]]) -> list[int]:
    return sorted({int(m.group(2)) for m in _MENTION.finditer(prompt)} - {n for n, _ in request})


def passes_through(task: AgentTask) -> bool:
    """Whether the request's own references pass through the runtime unchanged (the
    program carries none of them): there are some, and none or too many is mentioned."""
    request = _request(task)
    kept = mentioned_references(task)
    return bool(request) and (not kept or len(kept) > task.max_references)


def bind_references(
    prompt: str, task: AgentTask, notes: list[str]
) -> tuple[str, list[dict[str, str]]]:
    """``(gen_prompt, reference_images)`` for the request's references (module docstring):
    the mentioned ones with role ``subject``, mentions renumbered to the program's order;
    ``notes`` gets a line for each reference left out. No request references: ``(prompt,
    [])``."""
    request = _request(task)
    if not request:
        return prompt, []
    missing = _missing(prompt, request)
    if missing:
        notes.append(
            f"image {', '.join(map(str, missing))} mentioned, but the request has "
            f"{len(request)} reference(s): no such image"
        )
    kept = [(n, img_id) for n, img_id in request if mentions_reference(prompt, n)]
    if not kept:
        notes.append(
            f"none of the request's {len(request)} reference(s) is mentioned: they pass through"
        )
        return prompt, []
    for n, img_id in request:
        if (n, img_id) not in kept:
            notes.append(f"image {n} is never mentioned: left out")
    if len(kept) > task.max_references:
        notes.append(
            f"{len(kept)} references mentioned, at most {task.max_references} per render: "
            "the request's references pass through"
        )
        return prompt, []
    new = {n: i for i, (n, _) in enumerate(kept, start=1)}
    if any(n != i for n, i in new.items()):
        prompt = _MENTION.sub(
            lambda m: m.group(1) + str(new.get(int(m.group(2)), m.group(2))), prompt
        )
        notes.append("references renumbered: " + ", ".join(f"{n}->{i}" for n, i in new.items()))
    notes.append(f"{len(kept)} request reference(s) carried as subjects")
    return prompt, [{"img_id": img_id, "role": "subject"} for _, img_id in kept]


__all__ = [
    "Lookup",
    "RulePlanner",
    "Textured",
    "answer",
    "bind_references",
    "find_lookups",
    "find_textured",
    "mentioned_references",
    "missing_mentions",
    "passes_through",
    "pick_reference",
    "splice",
]
