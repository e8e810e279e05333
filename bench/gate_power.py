"""Power of the validation gate on simulated correlated verdicts (``evoharness.trace.power``).

Prints, per setting (target + held-out tasks × K seeds) and effect (Δ pass rate on the target
split), the share of simulated runs each rule accepts, with its Wilson 95% interval:

- effect 0 (a useless patch that changes only the programs where it triggers): the
  false-accept rate; the rule as implemented (``pooled``: target and held-out tasks as test
  units, O'Brien–Fleming-type alpha spending over two looks) must stay at or below 5%, as must
  ``pocock`` (the same units, both looks at 0.0294: the rule before 2026-12-06) and ``fresh``
  (target tasks only, the rule of 2026-12-01); ``reused`` is the gate before issue 16 (the analysis seeds reused as the
  baseline, verdict-level sign test);
- +3 pp and +5 pp (+10/+20 pp for the fault suite's 8 + 6 tasks): the power; ``task_sign``
  (a plain sign test over tasks on fresh seeds) is shown for comparison.

Usage: ``python bench/gate_power.py [--quick] [--sims N] [--setting 8+6x4 ...]`` (``--quick``: 100 runs per cell and
2,000 permutation draws; default 400 runs and 20,000 draws).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evoharness.trace.gates import GateConfig  # noqa: E402
from evoharness.trace.power import PowerScenario, simulate  # noqa: E402

#: (target tasks, held-out tasks, K seeds): make evolve's default split, larger runs, and the
#: fault suite's cases (8 target and 6 held-out tasks; effects of a repaired fault are large).
SETTINGS = [(60, 20, 4), (200, 40, 4), (60, 20, 16), (8, 6, 4)]
EFFECTS = {(8, 6, 4): [0.0, 0.10, 0.20]}
DEFAULT_EFFECTS = [0.0, 0.03, 0.05]


def _setting(text: str) -> tuple[int, int, int]:
    """``"8+6x4"`` → (8, 6, 4). Raises ``SystemExit`` naming the text when it does not parse."""
    try:
        tasks, k = text.lower().split("x")
        target, held = tasks.split("+")
        return int(target), int(held), int(k)
    except ValueError:
        raise SystemExit(f"--setting {text!r}: expected TARGET+HELD_OUTxK, e.g. 8+6x4") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 runs per cell, 2,000 draws")
    ap.add_argument("--sims", type=int, default=None, help="simulated runs per cell")
    ap.add_argument(
        "--setting",
        action="append",
        help="only this setting, TARGET+HELD_OUTxK (e.g. 8+6x4; repeatable; default: all)",
    )
    ap.add_argument("--extend-below", type=float, default=None, help="GateConfig.extend_below")
    args = ap.parse_args(argv)
    sims = args.sims or (100 if args.quick else 400)
    extra = {} if args.extend_below is None else {"extend_below": args.extend_below}
    gate = GateConfig(n_bootstrap=0, n_permutations=2000 if args.quick else 20000, **extra)
    settings = SETTINGS
    if args.setting:
        settings = [_setting(x) for x in args.setting]
    t0 = time.perf_counter()
    print(
        f"{'tgt+held x K':<12} {'effect':>7} {'rule':<10} {'accepted':>9} {'95% CI':>15} "
        f"{'mean Δ':>8} {'2nd look':>8}"
    )
    for n_tasks, n_held, k in settings:
        for effect in EFFECTS.get((n_tasks, n_held, k), DEFAULT_EFFECTS):
            rules = ["pooled", "pocock", "fresh", "reused"]
            if effect:
                rules.insert(2, "task_sign")
            for rule in rules:
                sc = PowerScenario(n_tasks=n_tasks, n_heldout=n_held, seeds=k, effect=effect)
                r = simulate(sc, rule, n_sims=sims, seed=1, gate=gate)
                print(
                    f"{n_tasks:>3}+{n_held:<3}x{k:<4} {effect * 100:>+6.0f}pp {rule:<10} "
                    f"{r.rate:>9.3f} "
                    f"[{r.ci95[0]:.3f}, {r.ci95[1]:.3f}] {r.mean_delta:>+8.4f} "
                    f"{r.second_looks:>8.2f}",
                    flush=True,
                )
    print(f"{sims} simulated runs per cell, {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
