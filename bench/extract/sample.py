"""Draw the stratified, seeded prompt sample the extractor fixture annotates.

Usage: ``python bench/extract/sample.py [--data ../shared/data] > sample.tsv``

Prints ``id<TAB>source<TAB>line<TAB>category<TAB>prompt`` rows: 35 prompts from each of the 8
T2I-CompBench training files (``<category>_train.txt``) and 13 from each of PartiPrompts' 11
"Challenge" values (``PartiPrompts.tsv``), 423 rows in all, drawn with ``random.Random(19)``
(19: the issue number) in the order listed here. ``line`` is the 1-based line number in the
source file (PartiPrompts' header is line 1); empty lines are never drawn.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from evoharness.tasks.builders import build_partiprompts, build_t2icompbench

T2I_CATEGORIES = (
    "color",
    "shape",
    "texture",
    "spatial",
    "3d_spatial",
    "non_spatial",
    "numeracy",
    "complex",
)
PER_T2I_CATEGORY = 35
PER_PARTI_CHALLENGE = 13
SEED = 19
#: The held-out sample (``--holdout``): drawn after the open reading was written, disjoint
#: from the main sample, annotated before the reading was run on it.
HOLDOUT = (2026, 4, 3)  # seed, per T2I category, per Parti challenge

Row = tuple[str, str, int, str, str]


def draw(data: Path) -> list[Row]:
    """The sample as ``(id, source, line, category, prompt)`` rows (see module docstring).

    Files are read by ``evoharness.tasks.builders`` (CRLF/LF, missing final newline, blank
    lines skipped); prompts are stripped of surrounding white space."""
    return _draw(data, SEED, PER_T2I_CATEGORY, PER_PARTI_CHALLENGE, set())


def draw_holdout(data: Path) -> list[Row]:
    """The held-out sample (``HOLDOUT``): same strata, none of ``draw``'s rows."""
    seed, per_t2i, per_parti = HOLDOUT
    return _draw(data, seed, per_t2i, per_parti, {r[0] for r in draw(data)})


def _draw(data: Path, seed: int, per_t2i: int, per_parti: int, exclude: set[str]) -> list[Row]:
    rng = random.Random(seed)
    rows: list[Row] = []
    for cat in T2I_CATEGORIES:
        source = f"t2icompbench/{cat}_train.txt"
        tasks = build_t2icompbench(data / source)
        candidates = [
            (int(t.metadata["line"]), t.prompt.strip())
            for t in tasks
            if f"t2i-{cat}-{int(t.metadata['line']):04d}" not in exclude
        ]
        for n, p in sorted(rng.sample(candidates, per_t2i)):
            rows.append((f"t2i-{cat}-{n:04d}", source, n, cat, p))
    source = "partiprompts/PartiPrompts.tsv"
    by_challenge: dict[str, list[tuple[int, str, str]]] = {}
    for t in build_partiprompts(data / source):
        challenge = str(t.metadata["challenge"])
        slug = _slug(challenge)
        if f"parti-{slug}-{int(t.metadata['line']):04d}" in exclude:
            continue
        by_challenge.setdefault(challenge, []).append(
            (int(t.metadata["line"]), t.prompt.strip(), t.task_family)
        )
    for challenge in sorted(by_challenge):
        picked = rng.sample(by_challenge[challenge], per_parti)
        slug = _slug(challenge)
        for n, p, category in sorted(picked):
            rows.append((f"parti-{slug}-{n:04d}", source, n, f"{challenge}/{category}", p))
    return rows


def _slug(challenge: str) -> str:
    return challenge.lower().replace(" & ", "-").replace(" ", "-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[3] / "shared/data"
    )
    ap.add_argument("--holdout", action="store_true", help="draw the held-out sample")
    args = ap.parse_args()
    for row in (draw_holdout if args.holdout else draw)(args.data):
        print("\t".join(str(x) for x in row))


if __name__ == "__main__":
    main()
