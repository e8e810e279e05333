"""Policy prompt rewrites (``evoharness.harness.schema.RewriteKind``).

Each rewrite is a pure function ``text -> RewriteResult`` that re-reads the text it is given
with the rule parser (``evoharness.runtime.extract.parse_prompt``), so rewrites compose in any
order. Each result says what changed (``details``) for the trace.

- ``move_negations``: "no X" / "without X" / "with no X" phrases are cut from the prompt and X
  goes to the negative prompt (a generator draws what the positive prompt names; a negative
  prompt steers away from it — classifier-free guidance with a negative condition).
- ``bind_attributes``: a clause naming two or more coloured objects is split into one clause
  per object ("a photo of a red car and a blue dog" → "a photo of a red car. a blue dog"), so
  colours cannot leak between objects of one clause (attribute binding, Feng et al. 2023,
  "Training-Free Structured Diffusion Guidance"). Clauses with a spatial relation are left
  alone (the relation would be lost); a layout binds those.
- ``compress``: drops filler words until the prompt fits the token budget; object phrases,
  relations, negations and quoted text are kept.
- ``spell_counts``: digits → number words, plural agreement ("2 dog" → "two dogs").
- ``enumerate_instances``: "three cats" → "a cat, a second cat and a third cat" (n ≤ 10).
- ``quote_text``: text to render is put in double quotes ('saying hello' → 'saying "hello"').
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evoharness.runtime.extract import CLIP_CONTEXT_TOKENS, token_count
from evoharness.runtime.grammar import lower_preserving
from evoharness.runtime.mentions import ObjectMention
from evoharness.runtime.rule_parse import TOKEN, parse_prompt
from evoharness.vocab import NUMBER_WORDS, article, plural

_ORDINALS: tuple[str, ...] = (
    *("", "", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"),
    "tenth",
)
_SPLITTABLE = {"and", ",", "with", "&", "plus", "as", "well"}

#: words dropped first by ``compress`` (photographic filler that names no object).
FILLER = frozenset(
    """the of photo picture image photograph very highly extremely beautiful beautifully
    detailed intricate realistic photorealistic hyperrealistic quality high best masterpiece
    4k 8k hd uhd ultra stunning amazing award winning professional cinematic lighting
    trending artstation sharp focus depth field bokeh there is are which that this these
    those some just really quite rather somewhat""".split()
)


@dataclass
class RewriteResult:
    """Output of one rewrite: the new ``text``, terms for the negative prompt, and
    ``details`` (what changed, for the trace). ``changed`` is True when text or terms moved."""

    text: str
    negative_terms: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def changed(self, before: str) -> bool:
        """Whether the rewrite changed anything."""
        return self.text != before or bool(self.negative_terms)


def _tidy(text: str) -> str:
    t = re.sub(r"[ \t]+", " ", text)
    t = re.sub(r" +([,.;])", r"\1", t)
    t = re.sub(r",\s*([.;])", r"\1", t)
    t = re.sub(r"(?:,\s*)+,", ",", t)
    # dangling connectors at clause ends / starts
    for _ in range(3):
        t = re.sub(r"\s*\b(?:and|with|or)\s*(?=[.;,]|$)", "", t)
        t = re.sub(r"(^|[.;]\s*)(?:and|,)\s+", r"\1", t)
    t = re.sub(r",\s*$", "", t)
    t = re.sub(r"^[\s.;,]+", "", t)
    return t.strip()


def move_negations(text: str, **_: Any) -> RewriteResult:
    """Cut negated object phrases; their classes become negative terms."""
    parse = parse_prompt(text)
    if not parse.negations:
        return RewriteResult(text)
    out = text
    removed: list[str] = []
    for m in sorted(parse.negations, key=lambda m: m.neg_start, reverse=True):
        removed.insert(0, text[m.neg_start : m.end])
        out = out[: m.neg_start] + out[m.end :]
    terms = list(dict.fromkeys(m.cls for m in parse.negations))
    return RewriteResult(_tidy(out), terms, {"removed": removed, "negative_terms": terms})


def bind_attributes(text: str, **_: Any) -> RewriteResult:
    """One clause per coloured object in clauses with two or more coloured objects."""
    parse = parse_prompt(text)
    related = {r.subject for r in parse.relations} | {r.other for r in parse.relations}
    cuts: list[tuple[int, int]] = []  # spans of connectors replaced by ". "
    split_clauses: list[int] = []
    skipped: list[str] = []
    by_clause: dict[int, list[int]] = {}  # clause -> object indices, in prompt order
    for k, m in enumerate(parse.objects):
        by_clause.setdefault(m.clause, []).append(k)
    for ci in range(len(parse.clauses)):
        idx = by_clause.get(ci, [])
        if sum(1 for k in idx if parse.objects[k].colors) < 2:
            continue
        if any(k in related for k in idx):
            skipped.append(f"clause {ci}: has a spatial relation")
            continue
        local: list[tuple[int, int]] = []
        for a, b in zip(idx, idx[1:], strict=False):
            seg = text[parse.objects[a].end : parse.objects[b].start]
            words = TOKEN.findall(lower_preserving(seg))
            if all(w in _SPLITTABLE for w in words):
                local.append((parse.objects[a].end, parse.objects[b].start))
        if local:
            cuts.extend(local)
            split_clauses.append(ci)
    if not cuts:
        return RewriteResult(text, details={"skipped": skipped} if skipped else {})
    out = text
    for s, e in sorted(cuts, reverse=True):
        out = out[:s] + ". " + out[e:]
    return RewriteResult(_tidy(out), details={"split_clauses": split_clauses, "skipped": skipped})


def _replace_phrases(
    text: str, mentions: list[ObjectMention], render: Callable[[ObjectMention], str | None]
) -> tuple[str, list[dict[str, str]]]:
    out = text
    changes: list[dict[str, str]] = []
    for m in sorted(mentions, key=lambda m: m.start, reverse=True):
        new = render(m)
        if new is None:
            continue
        old = text[m.start : m.end]
        if new != old:
            changes.insert(0, {"from": old, "to": new})
            out = out[: m.start] + new + out[m.end :]
    return out, changes


def _noun(m: ObjectMention, n: int | None) -> str:
    return plural(m.cls) if (n is None or n >= 2) else m.cls


def spell_counts(text: str, **_: Any) -> RewriteResult:
    """Digits → number words and plural agreement of the class noun."""
    parse = parse_prompt(text)

    def render(m: ObjectMention) -> str | None:
        if m.count is None or m.count_text is None:
            return None
        if m.count_text.isdigit() and m.count in NUMBER_WORDS:
            word = NUMBER_WORDS[m.count]
        else:
            word = m.count_text
        if word == m.count_text and (m.plural == (m.count >= 2) or m.cls in ("skis", "sheep")):
            return None
        colors = " ".join((*m.colors, *m.shapes, *m.textures))
        return " ".join(p for p in (word, colors, _noun(m, m.count)) if p)

    out, changes = _replace_phrases(text, parse.objects, render)
    return RewriteResult(out, details={"changes": changes} if changes else {})


def enumerate_instances(text: str, **_: Any) -> RewriteResult:
    """ "three cats" → "a cat, a second cat and a third cat" for counts 2..10."""
    parse = parse_prompt(text)

    def render(m: ObjectMention) -> str | None:
        n = m.count
        if n is None or not 2 <= n < len(_ORDINALS):
            return None
        head = " ".join(p for p in (*m.colors, *m.shapes, *m.textures, m.cls) if p)
        parts = [f"{article(head)} {head}"] + [
            f"{article(_ORDINALS[k])} {_ORDINALS[k]} {head}" for k in range(2, n + 1)
        ]
        return ", ".join(parts[:-1]) + " and " + parts[-1]

    out, changes = _replace_phrases(text, parse.objects, render)
    return RewriteResult(out, details={"changes": changes} if changes else {})


def quote_text(text: str, **_: Any) -> RewriteResult:
    """Put text to render in double quotes (unquoted 'saying X', typographic quotes)."""
    parse = parse_prompt(text)
    out = text
    changes: list[str] = []
    for t in sorted(parse.texts, key=lambda t: t.start, reverse=True):
        span = text[t.start : t.end]
        if t.quoted and span.startswith('"'):
            continue
        changes.insert(0, t.text)
        out = out[: t.start] + f'"{t.text}"' + out[t.end :]
    return RewriteResult(out, details={"quoted": changes} if changes else {})


def compress(text: str, max_tokens: int = CLIP_CONTEXT_TOKENS, **_: Any) -> RewriteResult:
    """Drop filler words until ``token_count(text) <= max_tokens`` (start/end tokens
    included). Drops ``FILLER`` words first, then any word outside an object phrase, relation,
    negation or quoted text, from the end of the prompt backwards; keeps clause punctuation.
    When even that does not fit, returns the shortest text it reached (``details.over``)."""
    before = token_count(text)
    if before <= max_tokens:
        return RewriteResult(text)
    parse = parse_prompt(text)
    keep_spans: list[tuple[int, int]] = []
    for m in (*parse.objects, *parse.negations, *parse.scoped):
        keep_spans.append((m.neg_start if m.negated else m.start, m.end))
    for t in parse.texts:
        keep_spans.append((t.start, t.end))
    for r in parse.relations:
        keep_spans.append((parse.objects[r.subject].end, parse.objects[r.other].start))
    low = lower_preserving(text)
    units: list[tuple[int, int, int, str]] = []  # start, end, n_tokens, tier (0 keep)
    pos = 0
    for s, e in sorted(keep_spans):
        if s < pos:
            continue
        units.extend(_word_units(low, pos, s))
        units.append((s, e, len(TOKEN.findall(low[s:e])), "keep"))
        pos = e
    units.extend(_word_units(low, pos, len(text)))
    total = sum(u[2] for u in units) + 2
    drop: set[int] = set()
    for tier in ("filler", "word", "comma"):
        for k in range(len(units) - 1, -1, -1):
            if total <= max_tokens:
                break
            if units[k][3] == tier:
                drop.add(k)
                total -= units[k][2]
    pieces = [text[s:e] for k, (s, e, _n, _t) in enumerate(units) if k not in drop]
    out = _tidy(_join(pieces))
    details: dict[str, Any] = {"tokens_before": before, "tokens_after": token_count(out)}
    if token_count(out) > max_tokens:
        details["over"] = token_count(out) - max_tokens
    return RewriteResult(out, details=details)


def _word_units(low: str, s: int, e: int) -> list[tuple[int, int, int, str]]:
    units = []
    for m in TOKEN.finditer(low[s:e]):
        w = m.group(0)
        if w in ".;":
            tier = "keep"
        elif w == ",":
            tier = "comma"
        elif w in FILLER:
            tier = "filler"
        elif re.fullmatch(r"[a-z0-9'\u2019]+", w):
            tier = "word"
        else:
            tier = "comma"
        units.append((s + m.start(), s + m.end(), 1, tier))
    return units


def _join(pieces: list[str]) -> str:
    out = ""
    for p in pieces:
        if not out or p[:1] in ",.;:!?)" or out.endswith(("(", " ")):
            out += p
        else:
            out += " " + p
    return out


REWRITES: dict[str, Callable[..., RewriteResult]] = {
    "move_negations": move_negations,
    "bind_attributes": bind_attributes,
    "compress": compress,
    "spell_counts": spell_counts,
    "enumerate_instances": enumerate_instances,
    "quote_text": quote_text,
}


def apply_rewrite(kind: str, text: str, *, max_tokens: int = CLIP_CONTEXT_TOKENS) -> RewriteResult:
    """Apply the rewrite ``kind`` (a ``RewriteKind``) to ``text``.

    Raises ``KeyError`` naming the kind when it is not one of ``REWRITES``."""
    try:
        fn = REWRITES[kind]
    except KeyError:
        raise KeyError(f"unknown rewrite {kind!r}; known: {sorted(REWRITES)}") from None
    return fn(text, max_tokens=max_tokens)


__all__ = ["FILLER", "REWRITES", "RewriteResult", "apply_rewrite", "token_count"]
