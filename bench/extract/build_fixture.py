"""Build ``fixture.jsonl`` from the hand annotations in ``annotations.txt`` (README.md).

Usage: ``python bench/extract/build_fixture.py [--data ../shared/data] [--check]``

Joins each annotation line with its prompt from ``sample.py``'s sample (same id), checks the
annotation (every sampled prompt annotated exactly once, relation ends name annotated objects,
colours and relations from the documented sets, counts ``>= 2`` or ``many``) and writes one JSON
line per prompt. ``--check`` writes nothing and exits 1 when ``fixture.jsonl`` differs from what
it would write. Bad annotations raise ``ValueError`` naming ``annotations.txt:<line>``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sample import draw, draw_holdout  # noqa: E402

#: GenEval's ten colour names plus the extension annotated here (README.md, "Colours").
COLOURS = (
    "red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white",
    "gray", "gold", "silver", "beige",
)  # fmt: skip
#: Canonical spatial relations (README.md, "Relations").
RELATIONS = (
    "left of", "right of", "above", "below", "behind", "in front of", "next to", "near", "on",
    "in",
)  # fmt: skip

_OBJECT = re.compile(
    r"^(?P<noun>[a-z0-9][a-z0-9 '\-]*?)\s*(?:=(?P<count>\d+|many))?\s*"
    r"(?:\{(?P<colours>[^}]*)\})?\s*(?:\[(?P<attrs>[^\]]*)\])?$"
)


def _split(s: str, sep: str) -> list[str]:
    return [p.strip() for p in s.split(sep) if p.strip()]


def parse_line(line: str, where: str) -> tuple[str, dict[str, Any]]:
    """``(id, atoms)`` of one annotation line ``id | objects | relations | negations | texts |
    ignore`` (trailing fields may be left out). Raises ``ValueError`` naming ``where``."""
    fields = [f.strip() for f in line.split("|")]
    if len(fields) < 2 or len(fields) > 6:
        raise ValueError(f"{where}: expected 2..6 '|'-separated fields, got {len(fields)}")
    fields += [""] * (6 - len(fields))
    pid, objs, rels, negs, texts, ignore = fields
    objects = []
    for o in _split(objs, ";"):
        m = _OBJECT.match(o)
        if m is None:
            raise ValueError(f"{where}: bad object {o!r} (noun[=N|=many][{{colours}}][[attrs]])")
        count: int | str = 1
        if m["count"]:
            count = "many" if m["count"] == "many" else int(m["count"])
            if count in (0, 1):
                raise ValueError(f"{where}: object {o!r}: write counts 0/1 without '='")
        colours = _split(m["colours"] or "", ",")
        for c in colours:
            if c not in COLOURS:
                raise ValueError(f"{where}: colour {c!r} of {o!r} is not one of {COLOURS}")
        objects.append(
            {
                "noun": m["noun"].strip(),
                "count": count,
                "colors": colours,
                "attributes": _split(m["attrs"] or "", ","),
            }
        )
    nouns = {o["noun"] for o in objects}
    relations = []
    for r in _split(rels, ";"):
        parts = [p.strip() for p in r.split(">")]
        if len(parts) != 3:
            raise ValueError(f"{where}: bad relation {r!r} (subject>relation>object)")
        s, rel, other = parts
        if rel not in RELATIONS:
            raise ValueError(f"{where}: relation {rel!r} is not one of {RELATIONS}")
        for n in (s, other):
            if n not in nouns:
                raise ValueError(f"{where}: relation {r!r} names {n!r}, not an annotated object")
        relations.append({"subject": s, "relation": rel, "object": other})
    atoms = {
        "objects": objects,
        "relations": relations,
        "negations": _split(negs, ";"),
        "texts": _split(texts, "^"),
        "ignore": _split(ignore, ";"),
    }
    return pid, atoms


def build(data: Path, annotations: Path, holdout: bool = False) -> list[dict[str, Any]]:
    """The fixture rows, in sample order (the held-out sample when ``holdout``). Raises
    ``ValueError`` on a bad or missing annotation."""
    parsed: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(annotations.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        where = f"{annotations.name}:{n}"
        pid, atoms = parse_line(line, where)
        if pid in parsed:
            raise ValueError(f"{where}: {pid} is annotated twice")
        parsed[pid] = atoms
    rows = []
    for pid, source, line_no, category, prompt in (draw_holdout if holdout else draw)(data):
        if pid not in parsed:
            raise ValueError(f"{annotations.name}: sampled prompt {pid} is not annotated")
        rows.append(
            {
                "id": pid,
                "source": source,
                "line": line_no,
                "category": category,
                "prompt": prompt,
                **parsed.pop(pid),
            }
        )
    if parsed:
        raise ValueError(f"{annotations.name}: ids not in the sample: {sorted(parsed)}")
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    """The JSONL text of ``rows`` (one compact, key-ordered line each)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=HERE.parents[2] / "shared/data")
    ap.add_argument("--check", action="store_true", help="only compare with the JSONL file")
    ap.add_argument(
        "--holdout",
        action="store_true",
        help="holdout_annotations.txt -> holdout.jsonl (sample.py --holdout)",
    )
    args = ap.parse_args()
    name = "holdout" if args.holdout else "fixture"
    notes = HERE / ("holdout_annotations.txt" if args.holdout else "annotations.txt")
    text = render(build(args.data, notes, holdout=args.holdout))
    out = HERE / f"{name}.jsonl"
    if args.check:
        same = out.exists() and out.read_text(encoding="utf-8") == text
        print(f"{out.name} is up to date" if same else f"{out.name} differs: rebuild it")
        return 0 if same else 1
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} ({text.count(chr(10))} prompts)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
