"""The quality score's seams component on clean and on layout-pasted single objects.

For each of the 80 GenEval classes × seeds 0..N−1, renders "a photo of a <class>" three ways —
clean (``sdxl-like``, no layout) and with one layout box (0.3..0.7 of the image; pasted
objects) on ``sd15-like`` and on ``sdxl-like`` — inspects each with ``SimInspector(...,
quality=True)`` and prints, per kind, the median ``seam_fraction`` and how many images the
seams component scores below 0.5 (a false alarm on clean images, a detection on pasted ones),
with the clean images flagged (class, seed, seam fraction).

Usage: ``python bench/seam_bench.py [--seeds 2]``. Exit status 0 always.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from evoharness.program import LayoutItem, Program
    from evoharness.sim import SimGenerator, SimInspector
    from evoharness.sim.profiles import load_profile
    from evoharness.vocab import CLASSES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    a = ap.parse_args(argv)
    insp = SimInspector()
    gens = {p: SimGenerator(load_profile(p)) for p in ("sdxl-like", "sd15-like")}
    kinds = (
        ("clean", "sdxl-like"),
        ("pasted sd15-like", "sd15-like"),
        ("pasted sdxl-like", "sdxl-like"),
    )
    rows: dict[str, list[tuple[str, int, float, float]]] = {k: [] for k, _ in kinds}
    for cls in CLASSES:
        for seed in range(a.seeds):
            for kind, prof in kinds:
                lay = None if kind == "clean" else [LayoutItem(label=cls, box=(0.3, 0.3, 0.7, 0.7))]
                img = gens[prof].generate(
                    Program(prompt=f"a photo of a {cls}", seed=seed, layout=lay)
                )
                q = insp.inspect(img.png, read_text=False, quality=True).quality
                assert q is not None
                rows[kind].append((cls, seed, q.seam_fraction, q.seams))
    for kind, r in rows.items():
        sf = np.array([x[2] for x in r])
        low = sum(x[3] < 0.5 for x in r)
        print(
            f"{kind}: {len(r)} images, median seam_fraction {np.median(sf):.2f}, "
            f"seams < 0.5: {low} ({100 * low / len(r):.1f}%)"
        )
    print("clean flagged:", [(c, s, round(f, 2)) for c, s, f, q in rows["clean"] if q < 0.5])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
