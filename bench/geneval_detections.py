"""The inspector's detections on GenEval renders, for checking that a change leaves them alone.

Renders every GenEval prompt (``../shared/data/geneval/evaluation_metadata.jsonl``) verbatim
with the simulator's defaults for seeds 0..``--seeds``−1, inspects each image (objects only,
no OCR) and writes one JSON line per image: the PNG's sha256 (first 12 hex), the number of
unknown blobs, and every detection's class, box (5 decimals), colour and texture. ``--compare
A B`` reads two such files and prints how many images differ (the renders must be the same
bytes; exit status 1 when any detection differs).

Usage: ``python bench/geneval_detections.py --out FILE [--seeds 2]`` on each checkout, then
``python bench/geneval_detections.py --compare BEFORE AFTER``. Used for issue 19's depth
relations: 1,106 images (seeds 0–1), 1,874 detections, identical before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def dump(out: Path, seeds: int) -> None:
    """Write the detections of every GenEval prompt × seed to ``out`` (JSON lines)."""
    from evoharness.program import Program
    from evoharness.sim import SimGenerator, SimInspector

    meta = ROOT.parent / "shared" / "data" / "geneval" / "evaluation_metadata.jsonl"
    prompts = [json.loads(x)["prompt"] for x in meta.read_text().splitlines() if x.strip()]
    gen, ins = SimGenerator(), SimInspector(ocr=False)
    with out.open("w") as fh:
        for seed in range(seeds):
            for p in prompts:
                img = gen.generate(Program(prompt=p, seed=seed))
                scene = ins.inspect(img.png, read_text=False)
                dets = [
                    (d.cls, [round(x, 5) for x in d.box], d.color, d.texture)
                    for d in scene.detections
                ]
                row = [hashlib.sha256(img.png).hexdigest()[:12], scene.unknown, dets]
                fh.write(json.dumps(row) + "\n")


def compare(a: Path, b: Path) -> int:
    """Print the images whose detections differ; 1 when any does (or the renders differ)."""
    ra = [json.loads(x) for x in a.read_text().splitlines()]
    rb = [json.loads(x) for x in b.read_text().splitlines()]
    if [r[0] for r in ra] != [r[0] for r in rb]:
        print("the renders differ (PNG sha256): not comparable")
        return 1
    diff = [i for i in range(len(ra)) if ra[i] != rb[i]]
    n_det = sum(len(r[2]) for r in ra)
    print(f"{len(ra)} images, {n_det} detections before; {len(diff)} images differ")
    for i in diff[:20]:
        print(f"  image {i}: {ra[i][1:]}\n        -> {rb[i][1:]}")
    return 1 if diff else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        ap.error("--out FILE or --compare BEFORE AFTER")
    dump(args.out, args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
