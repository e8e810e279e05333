"""``evoharness evolve start --dry-run-budget`` prints the estimate and calls nothing."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from evoharness.trace.budget import BudgetConfig, estimate_budget, load_prices
from evoharness_app.cli import app, main

ROOT = Path(__file__).resolve().parents[2]


def _task(i: int) -> dict:
    return {
        "task_id": f"t{i}",
        "prompt": f"a photo of {i + 2} cats",
        "task_family": "counting",
        "constraints": [
            {
                "constraint_id": "c0",
                "type": "count",
                "subject": "cat",
                "min_count": i + 2,
                "max_count": i + 2,
            }
        ],
    }


def test_dry_run_budget_prints_the_estimate(tmp_path: Path) -> None:
    held = tmp_path / "held.jsonl"
    held.write_text("\n".join(json.dumps(_task(i)) for i in range(10, 13)) + "\n")
    params = {
        "run_id": "dry",
        "harness": {"uri": f"file://{ROOT / 'harnesses' / 'baseline'}"},
        "splits": {
            "target": {"tasks": [_task(i) for i in range(5)]},
            "heldout": {"uri": f"file://{held}"},
        },
        "seeds": [0, 1, 2],
        "max_rounds": 2,
        # nothing listens here: a dry run must not connect
        "backends": {"generator": "grpc", "verifier": "grpc", "proposer": "llm"},
    }
    f = tmp_path / "params.json"
    f.write_text(json.dumps(params))
    res = CliRunner().invoke(
        app, ["evolve", "start", str(f), "--dry-run-budget", "--address", "127.0.0.1:1"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    want = estimate_budget(
        BudgetConfig(
            n_target=5, n_heldout=3, n_preservation=0, seeds=3, rounds=2, proposer="llm", beam=3
        ),
        load_prices(),
    )
    assert out["upper"]["generator_calls"] == want.upper.generator_calls
    assert out["expected"]["cost_usd"] == want.expected.cost_usd
    # round 1 expands one parent, round 2 the beam's three (default B = 3)
    assert out["upper"]["llm_calls"] == (1 + 3) * (1 + 3)


def test_bad_params_file_exits_1(tmp_path: Path, capsys) -> None:
    f = tmp_path / "params.yaml"
    f.write_text("run_id: [unclosed\n")
    assert main(["evolve", "start", str(f), "--dry-run-budget"]) == 1
    assert "params.yaml" in capsys.readouterr().err
    g = tmp_path / "p.json"
    g.write_text(json.dumps({"run_id": "x", "splits": {"target": {"uri": "s3://b/t.jsonl"}}}))
    assert main(["evolve", "start", str(g), "--dry-run-budget"]) == 1
    assert "--n-target" in capsys.readouterr().err


def test_shipped_evolution_configs_validate() -> None:
    import yaml

    from evoharness.trace.gate_config import GateConfig
    from workflows.backends import load_worker_settings
    from workflows.params import EvolutionParams

    p = EvolutionParams.model_validate(
        yaml.safe_load((ROOT / "configs" / "evolution.yaml").read_text())
    )
    assert p.gate.alpha == 0.0294 and p.gate.lam == 0.5 and p.gate.mu == 0.2 and p.beam == 3
    assert p.gate.spending == "fixed"
    assert p.gate.max_looks == 2 and p.gate.extend_below == 0.2
    spending = GateConfig.model_validate({"spending": "obrien_fleming"})  # its own defaults
    assert (spending.alpha, spending.max_looks, spending.extend_below) == (0.05, 3, 0.7)
    assert spending == GateConfig.alpha_spending()
    w = load_worker_settings(ROOT / "configs" / "evolution-worker.yaml")
    assert w.worker.task_queue == "evoharness"
