"""The policy extractor's precision and recall per atom kind on the hand-checked fixture.

Reads ``bench/extract/fixture.jsonl`` (423 hand-annotated prompts from T2I-CompBench's training
files and PartiPrompts; conventions in ``bench/extract/README.md``), runs the policy extractor
(``evoharness.runtime.extract.RuleExtractor().extract``) on each prompt, and compares what it
read with the annotation, atom by atom:

- ``object``: a noun (every object/count constraint's subject);
- ``count``: a noun with a count ≠ 1 — a number, or ``many`` for a plural with no number
  (a count constraint with ``max_count`` None);
- ``colour``, ``attribute``: a noun with a colour / another attribute;
- ``relation``: subject noun, relation, other noun;
- ``negation``: a noun stated absent; ``text``: a string to render (compared case-folded with
  white space collapsed);
- ``action``: a verb the prompt states (``actions`` rows of ``bench/extract/unseen.jsonl``,
  compared by its lemma: "playing with" → ``play``); no constraint type states one, so only
  an ``uncertain`` mark (``--reader policy``) reads it.

Nouns match when equal, when ``evoharness.vocab.class_of`` maps both to one class, or when
their last words are equal and they are not two different classes (``tree`` matches
``oak tree``; ``bear`` does not match ``teddy bear``). Atoms are matched one-to-one per prompt
(exact nouns first). A noun named in several phrases, one of them counted, is compared as
one object with the phrases' summed count, on both sides (``per_class_counts``: the extractor
states one count per class, "three boxes on a box" = 4 boxes). A predicted atom whose noun is one the annotation lists under ``ignore``
(scenes, mass nouns, …) and that matches no annotated atom is neither right nor wrong.

Two views: **all** atoms, and atoms **within the vocabulary** — what the embedded world's
verifier can check: every noun has a class (``class_of`` of the noun or of its last
word), a colour is one of ``evoharness.vocab.COLORS``, a relation one of
``evoharness.tasks.models.RELATIONS`` (GenEval's left of / right of / above / below, and
T2I-CompBench's next to / near / behind / in front of; the fixture's support ``on`` and
containment ``in`` are not position rules, so they are outside) with both objects in the
vocabulary, another attribute a texture, material or shape word (``evoharness.vocab.TEXTURE_WORDS``, ``SHAPE_WORDS``; the
rest the inspector reports ``uncertain``). Attribute values are compared by their canonical
texture or shape (``metal`` = ``metallic``, ``circular`` = ``round``). Precision = matched / predicted,
recall = matched / annotated, each with its Wilson 95% interval
(``evoharness.trace.aggregate.wilson_interval``). Also printed: the share of prompts from which
the extractor read nothing, and of those, how many have annotated atoms (silent misses);
per kind, the annotated atoms (all view) nothing read — with ``--reader policy``, the
**silent misses**: atoms neither a constraint nor an ``uncertain`` mark states (issue 30); and
how many positions were read between the two nouns of an annotated action (a verb read as a
position: "a cat jumping over a dog" as cat above dog).

``bench/extract/unseen.jsonl`` (48 prompts written by hand for issue 30 before the extractor
was changed for it: interaction verbs, verbs in long texture prompts, attribute words outside
the texture list, and placement verbs whose position must stay) is the set for silent misses:
``--fixture bench/extract/unseen.jsonl --reader policy``.

``--reader`` picks what is measured: ``rule`` (default) the rule extractor's constraints — what
the harness checks; ``reading`` the open reading (``evoharness.runtime.reading.read_open``);
``policy`` what ``evoharness extract`` prints (the constraints plus the ``uncertain`` marks).

The JSON output (``--json``) also records, under ``errors_in_vocabulary``, each prompt's
missed and wrong atoms within the vocabulary per kind; ``--errors [KIND ...]`` prints them.

Usage: ``python bench/extract_bench.py [--reader rule|reading|policy] [--fixture F] [--json OUT]
[--errors [KIND ...]]`` (``--fixture bench/extract/holdout.jsonl`` for the held-out set);
``--long-phrase N [N ...]`` only times the reading of ``"dog " * N`` (it must stay linear).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evoharness.runtime import explanation as _explanation  # noqa: E402
from evoharness.runtime import reading as _reading  # noqa: E402
from evoharness.runtime.extract import RuleExtractor  # noqa: E402
from evoharness.tasks.models import RELATIONS, Constraint, ConstraintType  # noqa: E402
from evoharness.trace.aggregate import wilson_interval  # noqa: E402
from evoharness.vocab import (  # noqa: E402
    COLORS,
    SHAPE_WORDS,
    SHAPES,
    TEXTURE_WORDS,
    TEXTURES,
    class_of,
)

KINDS = ("object", "count", "colour", "attribute", "relation", "negation", "text", "action")


@dataclass(frozen=True)
class Atom:
    """One checkable statement: ``kind``, the nouns it is about, and its value (count, colour,
    attribute, relation or text; None for object and negation)."""

    kind: str
    nouns: tuple[str, ...]
    value: str | int | None = None


def norm_noun(s: str) -> str:
    """Lower case, typographic apostrophes as ``'``, white space collapsed."""
    return " ".join(s.lower().replace("\u2019", "'").split())


def norm_text(s: str) -> str:
    """Case-folded, white space collapsed."""
    return " ".join(s.casefold().split())


def noun_match(pred: str, gold: str) -> bool:
    """Whether a predicted noun names the annotated one (module docstring)."""
    p, g = norm_noun(pred), norm_noun(gold)
    if p == g:
        return True
    cp, cg = class_of(p), class_of(g)
    if cp is not None and cp == cg:
        return True
    return p.split()[-1] == g.split()[-1] and not (cp and cg and cp != cg)


def gold_atoms(row: dict[str, Any]) -> list[Atom]:
    """The annotated atoms of one fixture row."""
    out: list[Atom] = []
    for o in row["objects"]:
        n = o["noun"]
        out.append(Atom("object", (n,)))
        if o["count"] != 1:
            out.append(Atom("count", (n,), o["count"]))
        out += [Atom("colour", (n,), c) for c in o["colors"]]
        out += [Atom("attribute", (n,), a) for a in o["attributes"]]
    out += [Atom("relation", (r["subject"], r["object"]), r["relation"]) for r in row["relations"]]
    out += [Atom("negation", (n,)) for n in row["negations"]]
    out += [Atom("text", (), norm_text(t)) for t in row["texts"]]
    out += [Atom("action", (), a["verb"]) for a in row.get("actions", ())]
    return out


def per_class_counts(atoms: Sequence[Atom]) -> list[Atom]:
    """``atoms`` with one object and one count atom per noun named in several phrases of which
    one is counted, as the extractor states them ("three boxes on a box": one ``box=4``): the
    count is the phrases' sum (1 for each object atom without a count), ``many`` when any is
    ``many``. Other atoms are kept in order; nouns are compared as written."""
    objects: dict[tuple[str, ...], int] = {}
    counts: dict[tuple[str, ...], list[Any]] = {}
    for a in atoms:
        if a.kind == "object":
            objects[a.nouns] = objects.get(a.nouns, 0) + 1
        elif a.kind == "count":
            counts.setdefault(a.nouns, []).append(a.value)
    summed = {n for n, k in objects.items() if k > 1 and counts.get(n)}
    out: list[Atom] = []
    done: set[tuple[tuple[str, ...], str]] = set()
    for a in atoms:
        if a.kind not in ("object", "count") or a.nouns not in summed:
            out.append(a)
        elif (a.nouns, a.kind) not in done:
            done.add((a.nouns, a.kind))
            if a.kind == "object":
                out.append(a)
            else:
                vs = counts[a.nouns]
                total = objects[a.nouns] - len(vs) + sum(v for v in vs if isinstance(v, int))
                out.append(Atom("count", a.nouns, "many" if "many" in vs else total))
    return out


def constraint_atoms(constraints: Iterable[Constraint]) -> list[Atom]:
    """The atoms a list of constraints states (module docstring)."""
    out: list[Atom] = []
    for c in constraints:
        t = c.type
        if t is ConstraintType.object:
            out.append(Atom("object", (c.subject,)))
        elif t is ConstraintType.count:
            out.append(Atom("object", (c.subject,)))
            if c.max_count is None:
                out.append(Atom("count", (c.subject,), "many"))
            elif c.max_count == c.min_count:
                if c.max_count != 1:
                    out.append(Atom("count", (c.subject,), c.max_count))
            else:
                out.append(Atom("count", (c.subject,), f"{c.min_count}..{c.max_count}"))
        elif t is ConstraintType.color:
            out.append(Atom("colour", (c.subject,), str(c.value)))
        elif t is ConstraintType.attribute:
            out.append(Atom("attribute", (c.subject,), str(c.value)))
        elif t is ConstraintType.position:
            out.append(Atom("relation", (c.subject, str(c.value)), c.relation))
        elif t is ConstraintType.negative:
            out.append(Atom("negation", (c.subject,)))
        elif t is ConstraintType.text:
            out.append(Atom("text", (), norm_text(str(c.value))))
    return out


def noun_class(noun: str) -> str | None:
    """The class of ``noun`` (``class_of``), or of its last word when the noun is a compound
    whose head is a class (``park bench`` → bench, ``pickup truck`` → truck)."""
    n = norm_noun(noun)
    return class_of(n) or class_of(n.split()[-1])


def checkable(a: Atom) -> bool:
    """Whether the embedded world's verifier can check atom ``a`` (module docstring); a
    relation must be one of ``evoharness.tasks.models.RELATIONS`` between objects of two classes;
    an action (a verb) never is."""
    if a.kind == "action":
        return False
    if any(noun_class(n) is None for n in a.nouns):
        return False
    if a.kind == "colour":
        return a.value in COLORS
    if a.kind == "relation":  # between two objects of one class no verifier tells which is which
        return a.value in RELATIONS and len({noun_class(n) for n in a.nouns}) == 2
    if a.kind == "attribute":
        return _value("attribute", a.value) in TEXTURES or _value("attribute", a.value) in SHAPES
    return True


def _value(kind: str, v: Any) -> Any:
    """An atom's value as compared: attributes by their canonical texture or shape."""
    if kind != "attribute" or not isinstance(v, str):
        return v
    return TEXTURE_WORDS.get(v) or SHAPE_WORDS.get(v) or v


def atom_match(p: Atom, g: Atom, exact: bool) -> bool:
    """Same kind and value, and each noun matching (equal nouns only when ``exact``)."""
    if (
        p.kind != g.kind
        or _value(p.kind, p.value) != _value(g.kind, g.value)
        or len(p.nouns) != len(g.nouns)
    ):
        return False
    same: Callable[[str, str], bool] = (
        (lambda a, b: norm_noun(a) == norm_noun(b)) if exact else noun_match
    )
    return all(same(a, b) for a, b in zip(p.nouns, g.nouns, strict=True))


def match_detail(
    pred: Sequence[Atom], gold: Sequence[Atom], ignore: Sequence[str]
) -> tuple[list[int], list[int]]:
    """``(unmatched gold indices, counted unmatched prediction indices)`` for one prompt and
    kind: one-to-one matches, equal nouns first; an unmatched prediction about an ignored noun
    is not counted."""
    free = list(range(len(pred)))
    matched = [False] * len(gold)
    for exact in (True, False):
        for gi, g in enumerate(gold):
            if matched[gi]:
                continue
            for k, pi in enumerate(free):
                if atom_match(pred[pi], g, exact):
                    matched[gi] = True
                    del free[k]
                    break
    wrong = [pi for pi in free if not any(noun_match(n, i) for n in pred[pi].nouns for i in ignore)]
    return [gi for gi, m in enumerate(matched) if not m], wrong


def match(pred: Sequence[Atom], gold: Sequence[Atom], ignore: Sequence[str]) -> tuple[int, int]:
    """``(matched, counted predictions)`` for one prompt and kind (``match_detail``)."""
    missed, wrong = match_detail(pred, gold, ignore)
    n_free_ignored = len(pred) - (len(gold) - len(missed)) - len(wrong)
    return len(gold) - len(missed), len(pred) - n_free_ignored


@dataclass
class Tally:
    """Matched, predicted (counted) and annotated atoms of one kind and view."""

    hits: int = 0
    n_pred: int = 0
    n_gold: int = 0

    def add(
        self, pred: Sequence[Atom], gold: Sequence[Atom], ignore: Sequence[str]
    ) -> tuple[list[Atom], list[Atom]]:
        """Count one prompt's atoms of this kind; returns ``(missed gold, wrong predictions)``."""
        missed, wrong = match_detail(pred, gold, ignore)
        self.hits += len(gold) - len(missed)
        self.n_pred += len(gold) - len(missed) + len(wrong)
        self.n_gold += len(gold)
        return [gold[i] for i in missed], [pred[i] for i in wrong]


def evaluate(
    rows: Sequence[dict[str, Any]], extract: Callable[[str], list[Atom]]
) -> dict[str, Any]:
    """Per view (``all``, ``vocab``) and kind: precision and recall with Wilson intervals;
    plus the prompts from which ``extract`` read nothing."""
    tallies = {v: {k: Tally() for k in KINDS} for v in ("all", "vocab")}
    nothing: list[str] = []
    silent: list[str] = []
    nothing_checkable = 0
    errors: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
    unread = dict.fromkeys(KINDS, 0)
    verb_positions = 0
    for row in rows:
        pred = per_class_counts(extract(row["prompt"]))
        if "actions" not in row:  # a fixture that does not annotate verbs: none is wrong
            pred = [a for a in pred if a.kind != "action"]
        gold = per_class_counts(gold_atoms(row))
        if not pred:
            nothing.append(row["id"])
            if gold:
                silent.append(row["id"])
        if not any(checkable(a) for a in pred):
            nothing_checkable += 1
        for view in ("all", "vocab"):
            keep = (lambda a: True) if view == "all" else checkable
            for kind in KINDS:
                missed, wrong = tallies[view][kind].add(
                    [a for a in pred if a.kind == kind and keep(a)],
                    [a for a in gold if a.kind == kind and keep(a)],
                    row["ignore"],
                )
                if view == "all":
                    unread[kind] += len(missed)
                    if kind == "relation":
                        verb_positions += _verb_positions(wrong, row.get("actions", ()))
                if view == "vocab" and (missed or wrong):
                    errors[kind].append(
                        {
                            "id": row["id"],
                            "prompt": row["prompt"],
                            "missed": [_atom_str(a) for a in missed],
                            "wrong": [_atom_str(a) for a in wrong],
                        }
                    )
    out: dict[str, Any] = {"prompts": len(rows), "views": {}}
    for view, per_kind in tallies.items():
        out["views"][view] = {}
        for kind, t in per_kind.items():
            out["views"][view][kind] = {
                "precision": _rate(t.hits, t.n_pred),
                "recall": _rate(t.hits, t.n_gold),
            }
    out["nothing_read"] = {"count": len(nothing), "ids": nothing}
    out["silent_misses"] = {"count": len(silent), "ids": silent}
    out["nothing_checkable"] = nothing_checkable
    out["annotated_empty"] = sum(1 for r in rows if not gold_atoms(r))
    out["errors_in_vocabulary"] = errors
    out["missed_per_kind"] = unread
    out["verb_as_position"] = verb_positions
    return out


def _verb_positions(wrong: Sequence[Atom], actions: Iterable[dict[str, Any]]) -> int:
    """How many of one prompt's wrong relation atoms are a position
    (``tasks.models.RELATIONS``) between the two nouns of an annotated action ("a cat jumping
    over a dog" read as cat above dog), in either order."""
    pairs = [(a["subject"], a["object"]) for a in actions if a.get("object")]
    n = 0
    for w in wrong:
        if w.value not in RELATIONS:
            continue
        p, q = w.nouns
        if any(
            (noun_match(p, s) and noun_match(q, o)) or (noun_match(p, o) and noun_match(q, s))
            for s, o in pairs
        ):
            n += 1
    return n


def _atom_str(a: Atom) -> str:
    """``a`` as one short line: ``dog=2``, ``dog{red}``, ``dog>left of>cat``, ``"text"``."""
    if a.kind == "relation":
        return f"{a.nouns[0]}>{a.value}>{a.nouns[1]}"
    if a.kind == "text":
        return repr(a.value)
    noun = a.nouns[0]
    return {
        "object": noun,
        "negation": f"no {noun}",
        "count": f"{noun}={a.value}",
        "colour": f"{noun}{{{a.value}}}",
        "attribute": f"{noun}[{a.value}]",
    }[a.kind]


def render_errors(result: dict[str, Any], kinds: Sequence[str]) -> str:
    """The atoms within the vocabulary that were missed (``-``) or wrongly read (``+``), per
    prompt, for ``kinds``."""
    lines: list[str] = []
    for kind in kinds:
        errs = result["errors_in_vocabulary"][kind]
        lines.append(f"{kind} errors within the vocabulary: {len(errs)} prompt(s)")
        for e in errs:
            lines.append(f"  {e['id']}: {e['prompt']}")
            lines += [f"    - {m}" for m in e["missed"]] + [f"    + {w}" for w in e["wrong"]]
    return "\n".join(lines)


def _rate(k: int, n: int) -> dict[str, Any]:
    lo, hi = wilson_interval(k, n)
    return {"k": k, "n": n, "rate": (k / n) if n else None, "ci95": [round(lo, 3), round(hi, 3)]}


def _fmt(r: dict[str, Any]) -> str:
    if not r["n"]:
        return f"{'-':>6} {'':>13} {0:>4}"
    return f"{r['rate']:6.3f} [{r['ci95'][0]:.3f},{r['ci95'][1]:.3f}] {r['n']:>4}"


def render(result: dict[str, Any], title: str) -> str:
    """The printed table of ``evaluate``'s result."""
    lines = [f"{title}: {result['prompts']} prompts", ""]
    head = f"{'kind':<10} {'precision [95% CI]':>22} {'n':>4}   {'recall [95% CI]':>22} {'n':>4}"
    for view, label in (("vocab", "within the vocabulary"), ("all", "all atoms")):
        lines += [label, head]
        for kind, r in result["views"][view].items():
            lines.append(f"{kind:<10} {_fmt(r['precision']):>27}   {_fmt(r['recall']):>27}")
        lines.append("")
    n = result["prompts"]
    nr, sm = result["nothing_read"]["count"], result["silent_misses"]["count"]
    lines.append(
        f"prompts with nothing read: {nr}/{n} ({nr / n:.1%}); of these, with annotated "
        f"atoms (silent misses): {sm} ({sm / n:.1%} of all prompts)"
    )
    missed = result["missed_per_kind"]
    lines.append(
        "annotated atoms read by no constraint"
        + (" and no uncertain mark (silent misses)" if result.get("reader") == "policy" else "")
        + ", per kind: "
        + ", ".join(f"{k} {v}" for k, v in missed.items())
        + f" (total {sum(missed.values())})"
    )
    lines.append(f"positions read from an annotated action's verb: {result['verb_as_position']}")
    nc = result["nothing_checkable"]
    lines.append(
        f"prompts with nothing checkable read: {nc}/{n} ({nc / n:.1%}); "
        f"annotated with nothing at all: {result['annotated_empty']}"
    )
    return "\n".join(lines)


def reading_atoms(prompt: str) -> list[Atom]:
    """The atoms of the open reading ``evoharness.runtime.reading.read_open(prompt)``."""
    out = []
    for kind, nouns, value in _reading.reading_atoms(_reading.read_open(prompt)):
        out.append(Atom(kind, nouns, norm_text(str(value)) if kind == "text" else value))
    return out


def policy_atoms(prompt: str) -> list[Atom]:
    """The atoms ``evoharness extract`` prints for ``prompt`` (``explanation.explain``): the rule
    extractor's constraints plus everything marked ``uncertain``."""
    out = []
    info = _explanation.explain(prompt)
    out += constraint_atoms(Constraint.model_validate(c) for c in info["constraints"])
    for u in info["uncertain"]:
        kind = u["kind"]
        if kind == "object":
            n = u["noun"]
            out.append(Atom("object", (n,)))
            if u["count"] != 1:
                out.append(Atom("count", (n,), u["count"]))
            out += [Atom("colour", (n,), c) for c in u["colors"]]
            out += [Atom("attribute", (n,), a) for a in u["attributes"]]
        elif kind == "count":
            out.append(Atom("count", (u["noun"],), u["count"]))
        elif kind in ("colour", "attribute"):
            out.append(Atom(kind, (u["noun"],), u["value"]))
        elif kind == "relation":
            out.append(Atom("relation", (u["subject"], u["object"]), u["relation"]))
        elif kind == "negation":
            out.append(Atom("negation", (u["noun"],)))
        elif kind == "text":
            out.append(Atom("text", (), norm_text(u["value"])))
        elif kind == "action":
            out.append(Atom("action", (), u["verb"]))
    return out


def rule_extractor_atoms(prompt: str) -> list[Atom]:
    """The atoms of ``RuleExtractor().extract(prompt)``."""
    return constraint_atoms(RuleExtractor().extract(prompt))


def load(path: Path) -> list[dict[str, Any]]:
    """Fixture rows; ``ValueError`` names ``path:line`` of a bad row."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            row = json.loads(line)
            _ = (row["prompt"], row["objects"], row["relations"], row["ignore"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: not a fixture row: {exc}") from None
        rows.append(row)
    return rows


def time_long_phrases(words: Sequence[int]) -> list[dict[str, Any]]:
    """Seconds ``explanation.explain`` (the rule extractor plus the open reading, what
    ``evoharness extract`` runs per prompt) takes on one phrase of ``n`` repeated nouns
    (``"dog " * n``), per ``n`` in ``words``: the reading must stay linear in the prompt."""
    import time

    out = []
    for n in words:
        t0 = time.perf_counter()
        _explanation.explain("dog " * n)
        out.append({"words": n, "seconds": round(time.perf_counter() - t0, 3)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", type=Path, default=ROOT / "bench" / "extract" / "fixture.jsonl")
    ap.add_argument("--reader", choices=("rule", "reading", "policy"), default="rule")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    ap.add_argument(
        "--errors",
        nargs="*",
        choices=KINDS,
        metavar="KIND",
        help="also print each prompt's missed (-) and wrong (+) atoms within the vocabulary "
        "for these kinds (all kinds when none is named)",
    )
    ap.add_argument(
        "--long-phrase",
        nargs="+",
        type=int,
        metavar="WORDS",
        help="only time evoharness extract's reading of one phrase of WORDS repeated nouns",
    )
    args = ap.parse_args()
    if args.long_phrase:
        for r in time_long_phrases(args.long_phrase):
            print(f"{r['words']:>7} words: {r['seconds']:.3f} s")
        return
    rows = load(args.fixture)
    readers = {
        "rule": (rule_extractor_atoms, "RuleExtractor().extract"),
        "reading": (reading_atoms, "evoharness.runtime.reading.read_open (open reading)"),
        "policy": (policy_atoms, "evoharness extract (rule constraints + uncertain marks)"),
    }
    fn, title = readers[args.reader]
    result = evaluate(rows, fn)
    result["reader"] = args.reader
    print(render(result, title))
    if args.errors is not None:
        print()
        print(render_errors(result, args.errors or KINDS))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
