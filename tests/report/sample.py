"""A synthetic run for the report tests: two rounds (one accepted patch, one No-Patch),
candidates with gate figures, and before/after PNGs drawn with Pillow."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from PIL import Image, ImageDraw

from evoharness.harness.patch import Patch
from evoharness.report.models import ConstraintVerdict, ImagePair, PassRate, RunReportInput
from evoharness.trace.models import (
    Attribution,
    Candidate,
    CandidateStatus,
    Decision,
    DecisionKind,
    FailureCluster,
    GateReport,
    RoundReport,
)
from evoharness.trace.preservation import PreservationSet

#: Background colours of the before / after images; nothing else on the page uses them, so
#: finding them in a screenshot proves the images were decoded and painted.
BEFORE_RGB = (232, 72, 40)
AFTER_RGB = (36, 96, 224)

H0 = "a" * 64
H1 = "b" * 64


def draw_png(path: Path, background: tuple[int, int, int], n_clocks: int) -> Path:
    img = Image.new("RGB", (256, 256), background)
    d = ImageDraw.Draw(img)
    for i in range(n_clocks):
        x = 40 + i * 70
        d.ellipse((x, 90, x + 60, 150), fill=(250, 250, 250), outline=(20, 20, 20), width=4)
        d.line((x + 30, 120, x + 30, 100), fill=(20, 20, 20), width=3)
        d.line((x + 30, 120, x + 45, 120), fill=(20, 20, 20), width=3)
    img.save(path, format="PNG")
    return path


def gate(dt: float, accepted: bool, reasons: list[str]) -> GateReport:
    return GateReport(
        delta_target=dt,
        delta_heldout=0.01,
        delta_preservation=-0.002 if accepted else -0.03,
        regression=0.002 if accepted else 0.03,
        delta_cost=0.04,
        utility=dt - 0.5 * 0.002 - 0.05 * 0.04,
        p_value=0.003 if accepted else 0.41,
        n_discordant=31 if accepted else 9,
        epsilon=0.01,
        ci95={"target": (dt - 0.03, dt + 0.03)},
        accepted=accepted,
        reasons=reasons,
    )


def make_run(tmp: Path, n_pairs: int = 2) -> RunReportInput:
    pairs = []
    for i in range(n_pairs):
        before = draw_png(tmp / f"before{i}.png", BEFORE_RGB, 3)
        after = draw_png(tmp / f"after{i}.png", AFTER_RGB, 2)
        pairs.append(
            ImagePair(
                task_id=f"geneval/evaluation_metadata/{181 + i}",
                prompt="a photo of two clocks <b>not bold</b>",
                seed=i,
                split="target",
                task_family="counting",
                before_png=before,
                after_png=after,
                verdicts=[
                    ConstraintVerdict(
                        constraint_id="c0",
                        type="count",
                        description="clock × 2",
                        before="fail",
                        after="pass",
                        note="saw 3",
                    )
                ],
            )
        )
    patch = Patch(
        responsibility="tools",
        ops=[
            {
                "op": "add",
                "path": "/tools/tools/-",
                "value": {"kind": "layout_planner", "name": "layout", "when": ["count"]},
            }
        ],
        rationale="counts drift above n=2 without boxes",
        expected_effect="counting pass rate up",
    )
    r1 = RoundReport(
        run_id="run-42",
        round=1,
        parent_harness_id=H0,
        clusters=[
            FailureCluster(
                cluster_id="k1",
                responsibility_hint="tools",
                constraint_type="count",
                symptom="count_wrong",
            ),
            FailureCluster(
                cluster_id="k2",
                responsibility_hint="no_patch",
                constraint_type="color",
                symptom="color_leak",
            ),
        ],
        attributions=[
            Attribution(
                cluster_id="k1",
                scores={"tools": 0.8, "no_patch": 0.2},
                chosen="tools",
                reasons=["localizer chose tools: the count is wrong on every seed"],
            ),
            Attribution(
                cluster_id="k2",
                scores={"policy": 0.3, "no_patch": 0.7},
                chosen="no_patch",
                reasons=["flip rate 0.5: generator noise across seeds"],
            ),
        ],
        candidates=[
            Candidate(
                candidate_id="r1-c1",
                cluster_id="k1",
                patch=patch,
                status=CandidateStatus.accepted,
                harness_id=H1,
                gate=gate(0.12, True, []).model_copy(
                    update={"seeds": [4, 5, 6, 7], "p_holm": 0.006, "n_tasks": 60}
                ),
                scope_probes={
                    "ok": True,
                    "detail": "",
                    "scope": "count",
                    "groups": {"count": [0.5, 0.75, 0, 16]},
                    "executions": 32,
                },
            ),
            Candidate(
                candidate_id="r1-c2",
                cluster_id="k1",
                patch=Patch(
                    responsibility="policy",
                    ops=[{"op": "replace", "path": "/policy/params/guidance_scale", "value": 9.0}],
                ),
                status=CandidateStatus.validated,
                gate=gate(0.01, False, ["Δtarget not significant (p=0.41 ≥ 0.05)"]).model_copy(
                    update={
                        "look": 2,
                        "seeds": [4, 5, 6, 7, 8, 9, 10, 11],
                        "p_holm": 0.82,
                        "n_tasks": 60,
                        "n_tasks_changed": 9,
                        "family_regressions": {
                            "single_object": {
                                "tasks": 7.0,
                                "verdicts": 56.0,
                                "delta": -0.0536,
                                "regression": 0.0536,
                                "epsilon": 0.0179,
                            },
                            "counting": {
                                "tasks": 5.0,
                                "verdicts": 40.0,
                                "delta": 0.0,
                                "regression": 0.0,
                                "epsilon": 0.025,
                            },
                        },
                    }
                ),
            ),
            Candidate(
                candidate_id="r1-c3",
                cluster_id="k1",
                source="llm",
                raw={"responsibility": "tools", "ops": [{"op": "add", "path": "/policy/x"}]},
                status=CandidateStatus.rejected,
                reject_reason="op 0 (add /policy/x) is outside the boundary contract of tools",
            ),
        ],
        preservation=PreservationSet(
            task_ids=[f"p{i}" for i in range(14)],
            selection_seeds=[0, 1, 2, 3],
            pool=20,
            families={"counting": 5, "single_object": 7, "colors": 2},
            classes=17,
            pool_classes=24,
        ),
        decision=Decision(
            kind=DecisionKind.accepted,
            reason="Δtarget +12.0 pp (p=0.003), held-out +1.0 pp, regression 0.2 pp ≤ ε",
            harness_id=H1,
            parent_harness_id=H0,
            candidate_id="r1-c1",
        ),
        pass_rates={"target": 0.71},
        cost={"generator_seconds": 812.5, "llm_tokens": 0, "cost_usd": 0.41},
    )
    r2 = RoundReport(
        run_id="run-42",
        round=2,
        parent_harness_id=H1,
        candidates=[
            Candidate(
                candidate_id="r2-c1",
                cluster_id="k3",
                patch=Patch(
                    responsibility="middleware",
                    ops=[
                        {
                            "op": "add",
                            "path": "/middleware/stages/-",
                            "value": {"kind": "best_of_n", "n": 4},
                        }
                    ],
                ),
                status=CandidateStatus.validated,
                gate=gate(0.02, False, ["regression 3.0 pp > ε 1.0 pp"]),
            ),
            Candidate(
                candidate_id="r2-c2",
                cluster_id="k3",
                status=CandidateStatus.rejected,
                reject_reason="scope_regression: bicycle alone 100% -> 0% on the probes",
                scope_probes={
                    "ok": False,
                    "detail": "bicycle alone 100% -> 0%",
                    "scope": "bicycle",
                    "groups": {"bicycle": [1.0, 0.0, 8, 8]},
                    "executions": 16,
                },
            ),
        ],
        decision=Decision(
            kind=DecisionKind.no_patch,
            reason="no candidate passed the gate: best r2-c1 regressed preservation by 3.0 pp",
            harness_id=H1,
            parent_harness_id=H1,
        ),
        pass_rates={"target": 0.71},
        cost={"generator_seconds": 1204.0, "llm_tokens": 5120, "cost_usd": 0.63},
    )
    start = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)
    return RunReportInput(
        run_id="run-42",
        started_at=start,
        finished_at=start + timedelta(minutes=47, seconds=12),
        generator_id="sim-v1",
        baseline_harness_id=H0,
        final_harness_id=H1,
        split_pass_rates={
            "target": PassRate(before=0.59, after=0.71, n=2000),
            "heldout": PassRate(before=0.60, after=0.61, n=400),
            "preservation": PassRate(before=0.82, after=0.818, n=400),
            "test": PassRate(before=0.58, after=0.66, n=400),
        },
        mode="label-free (constraints read from each prompt by rules-v1@0123456789ab)",
        tag_pass_rates={
            "counting": PassRate(before=0.31, after=0.66, n=320),
            "colors": PassRate(before=0.78, after=0.77, n=376),
            "position": PassRate(before=0.22, after=0.41, n=400),
        },
        rounds=[r1, r2],
        image_pairs=pairs,
        notes=[
            "Rendered by the embedded CPU simulator (a behavioural model, not a diffusion model)."
        ],
    )
