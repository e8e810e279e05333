"""End to end: a reduced ``make evolve`` through the real local stack (Temporal dev server,
SeaweedFS S3, registry, generation, verification, proposer and runtime services, worker).

One stack per session: started by ``services.stack.up`` on free ports, stopped by PID at the
end even when a test fails.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness_registry import Lineage
from services import stack
from tests.conftest import SHARED, require

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory: pytest.TempPathFactory):
    require((SHARED / "data" / "geneval").is_dir(), "shared GenEval data is missing")
    run_dir = tmp_path_factory.mktemp("stack")
    state = stack.up(run_dir)
    try:
        yield run_dir, state
    finally:
        stack.down(run_dir)


def test_starting_twice_is_refused(local_stack) -> None:
    run_dir, state = local_stack
    assert set(stack.running_components(state)) == {
        "temporal",
        "s3",
        "registry",
        "generation",
        "verification",
        "proposer",
        "runtime",
        "worker",
    }
    with pytest.raises(stack.StackError, match="already running"):
        stack.up(run_dir)
    # the refused start left the running stack alone
    assert len(stack.running_components(stack.read_state(run_dir))) == 8


def test_reduced_main_job(local_stack, tmp_path: Path) -> None:
    from evoharness_app.main_job import MainJob, MainJobOptions
    from evoharness_app.summary import print_summary

    run_dir, state = local_stack
    opts = MainJobOptions(
        runs_dir=tmp_path / "runs",
        stack_dir=run_dir,
        run_id="e2e",
        sizes=(10, 4, 4, 4),
        synthetic_count=24,
        transfer=8,
        seeds=(0, 1),
        max_rounds=2,
    )
    # the console is a file (not a terminal), as under nohup or CI
    buf = io.StringIO()
    job = MainJob(opts, console=Console(file=buf, width=220))
    # scikit-learn (the label-free overlap check's TF-IDF stand-in) sets two OpenMP variables
    # with os.environ.setdefault when first imported; that is the library's doing, not the job's
    import sklearn  # noqa: F401

    env_before = dict(os.environ)
    result = job.run()
    assert dict(os.environ) == env_before, "the main job must not change this process's env"
    print_summary(result, job.console)
    console = buf.getvalue()

    summary = json.loads((result.run_dir / "summary.json").read_text())
    # issue 27 item 9: progress reaches a non-terminal console as plain lines
    assert re.search(r"^evolution: ", console, re.M), console[:2000]
    assert re.search(r"^evaluate baseline: \d+/\d+ \(100%\)", console, re.M)
    # item 8: the decisions are the final harness's patches, with the gate figures of the
    # candidate it came from; item 6: cost per request and the spend
    if summary["final_harness_id"] != summary["baseline_harness_id"]:
        assert summary["patches"], "the promoted harness's lineage is known from its rounds"
        last = summary["patches"][-1]
        assert f"the final harness came from {last['candidate_id']} (" in console
        assert "Δtarget" in console and "utility" in console
    assert "cost per request (baseline → final" in console and "spend $" in console
    assert (
        summary["request_cost"]["final"]["requests"]
        == summary["request_cost"]["baseline"]["requests"]
    )
    before, after = summary["scores"]["before"], summary["scores"]["after"]
    # the run really happened: every split was scored on both harnesses
    for split in ("target", "heldout", "preservation", "test"):
        assert (
            before[split]["verdicts"] > 0 and after[split]["verdicts"] == before[split]["verdicts"]
        )
    # the final figures are the untouched test split's, which the workflow never received
    assert summary["final"]["split"] == "test"
    # issue 30 item 4: baseline and evolved harness on a transfer set no evolution split came
    # from (constraints read by the fixed extractor), and the share of the test gain kept
    tr = summary["transfer"]
    assert tr["sources"] == {"t2icompbench": 4, "partiprompts": 4}
    assert set(tr["evolution_sources"]) == {"geneval", "synthetic"}
    assert tr["extractor"].startswith("rules-v1@") and tr["seeds"] == 2
    off, test_off = tr["official"], tr["test_official"]
    assert off["tasks"] == 8 and off["verdicts"] > 0 and tr["internal"]["verdicts"] > 0
    assert off["gain"] == pytest.approx(off["after"] - off["before"])
    assert off["gain_ci95"][0] <= off["gain_ci95"][1]
    official_final = summary["final"]["official_constraint_pass_rate"]
    assert (test_off["before"], test_off["after"]) == pytest.approx(
        (official_final["before"], official_final["after"])
    )
    if test_off["gain"] > 0:
        assert tr["gain_kept"] == pytest.approx(off["gain"] / test_off["gain"])
    else:
        assert tr["gain_kept"] is None
    transfer_tasks = (result.run_dir / "splits" / "transfer.jsonl").read_text().splitlines()
    assert len(transfer_tasks) == 8
    assert re.search(
        r"^tasks: target 10, heldout 4, preservation 4, test 4, transfer 8 ", console, re.M
    )
    (line,) = [ln for ln in console.splitlines() if ln.startswith("transfer (")]
    assert f"{off['before']:.3f} → {off['after']:.3f}, gain {off['gain']:+.3f}" in line
    # label-free by default, the test split checked for overlap; the report says so
    assert summary["mode"].startswith("label-free (constraints read from each prompt by rules-v1@")
    assert "no overlap with the 4 scored-on prompts" in summary["mode"]
    # prompts the extractor read nothing checkable from are counted, not passed (issue 19)
    nc = summary["nothing_checkable"]
    assert nc["of"] == 18 and nc["prompts"] == len(nc["tasks"])  # 10 + 4 + 4 evolution tasks
    assert f"nothing checkable read from {nc['prompts']} of 18 prompt(s)" in summary["mode"]
    assert set(summary["final"]["constraint_pass_rate"]) == {"before", "after"}
    params = json.loads((result.run_dir / "params.json").read_text())
    assert set(params["splits"]) == {"target", "heldout", "preservation"}
    assert summary["decisions"], "every round records a decision"
    assert summary["generator_calls"] > 0
    # evolution's verifier is the erring sim-detector (the stack's verification service);
    # the official columns re-score the same images with the exact inspector
    assert summary["verifiers"]["internal"].startswith("sim-detector@")
    assert summary["verifiers"]["official"].startswith("sim-inspector")
    official = summary["official_scores"]
    for role, internal in (("before", before), ("after", after)):
        for split in ("target", "heldout", "preservation"):
            assert official[role][split]["verdicts"] == internal[split]["verdicts"]
    # the two verifiers disagree somewhere (the internal one errs like a real detector)
    assert any(
        official[role][split]["constraint_pass_rate"]
        != summary["scores"][role][split]["constraint_pass_rate"]
        for role in ("before", "after")
        for split in ("target", "heldout", "preservation")
    )
    if summary["final_harness_id"] != summary["baseline_harness_id"]:
        # an accepted harness passed the gate on target without preservation regression
        assert after["target"]["constraint_pass_rate"] > before["target"]["constraint_pass_rate"]
        assert summary["accepted_diffs"]
    # the result is what channel dev serves now
    from services.registry.client import RegistryClient

    opts = stack.client_options(state)  # auth is on by default in the local stack
    registry = RegistryClient(state.address("registry"), token=opts["token"] or "")
    resolved = registry.resolve("dev", with_document=False)
    assert resolved.registration_id == result.promoted_registration
    assert resolved.harness_id == summary["final_harness_id"]
    promoted, _ = registry.get(resolved.registration_id)
    # issue 27 item 2: the promoted registration's parents lead back to the baseline's
    # registration, each a candidate that passed its gate (after Holm's correction) in the
    # run's round reports, its parent the harness it was gated against (a round's decision
    # or another gate-passing child the frontier kept: the decisions record only the former)
    from evoharness_app.run_report import read_round_reports
    from services.storage.s3 import S3ArtifactStore

    store = S3ArtifactStore.from_settings(job.worker_settings(state).s3)
    keys = {d["report_key"] for d in summary["decisions"]}
    keys |= {b["report_key"] for d in summary["decisions"] for b in d.get("beam") or []}
    reads = read_round_reports(store, sorted(keys))
    assert not reads.unreadable, reads.unreadable
    passed = {
        (c.harness_id, rep.parent_harness_id)
        for rep in reads.reports
        for c in rep.candidates
        if c.gate is not None and c.gate.accepted
    }
    chain = registry.lineage(promoted.registration_id)
    assert chain[0].registration_id == promoted.registration_id
    assert chain[-1].registration_id == summary["baseline_registration"], [
        (r.name, r.parent_id) for r in chain
    ]
    assert chain[-1].harness_id == summary["baseline_harness_id"]
    for child, parent in zip(chain, chain[1:], strict=False):
        assert child.parent_id == parent.registration_id
    for child, parent in zip(chain, chain[1:], strict=False):
        assert (child.harness_id, parent.harness_id) in passed, child.name
    if summary["final_harness_id"] != summary["baseline_harness_id"]:
        # the worker's own registration of it (a name and description of its own, not the
        # baseline's: issue 14 item 10), with the generator it was validated on
        assert promoted.name.startswith("baseline+e2e.r")
        assert promoted.description.startswith("Evolved by run e2e, round ")
        assert promoted.workflow_id == "e2e" and promoted.registered_by.startswith("workflow:e2e/")
        assert promoted.generator_id == summary["generator_id"]
        assert len(chain) >= 2
    else:
        assert promoted.name == "baseline" and len(chain) == 1
    # a self-contained report with its images beside it
    html = result.report.read_text()
    # item 5: the headline is the untouched test split, with intervals; item 7: rounds are
    # rounds (not round reports), each card names the verifier of its verdicts
    assert "Test pass rate (untouched split)" in html and "95% CI [" in html
    n_rounds = len({d["round"] for d in summary["decisions"]})
    assert f'<div class="label">Rounds</div><div class="value">{n_rounds}</div>' in html
    assert 'id="request-cost"' in html
    if 'class="pair"' in html:
        assert f"<code>{summary['verifiers']['internal']}</code>, the internal verifier" in html
    assert "e2e" in html
    assert 'id="verifier-scores"' in html and summary["verifiers"]["internal"] in html
    assert 'id="transfer-rates"' in html and 'id="gain-kept"' in html
    for split in ("target", "heldout", "preservation"):
        assert f'data-split="{split}"' in html
    srcs = re.findall(r'<img class="(?:before|after)" src="([^"]+)"', html)
    if summary["accepted_diffs"]:
        assert srcs, "an accepted patch changes programs, so the report shows image pairs"
    if srcs:  # each card says why it is shown (issue 14 item 7), one card per task
        assert re.search(r'class="badge (improved|regressed|unchanged|example)"', html)
        cards = re.findall(r'class="pair" data-task-id="([^"]+)"', html)
        assert len(cards) == len(set(cards))
    for src in srcs:  # every image is beside the page (never a remote or presigned link)
        assert src.startswith("images/") and (result.run_dir / src).stat().st_size > 0
    # the promotion decision, on the console and on the page (dev served nothing: moved)
    promo = summary["promotion"]
    assert promo["move"] is True and result.promoted_registration == promo["candidate_registration"]
    assert f"channel dev serves registration {result.promoted_registration}: promoted " in console
    assert not re.search(r"promoted registration\s*$", console, re.M)
    assert re.search(r'<p class="reason" id="promotion" data-moved="true"><strong>Channel', html)
    # the stack this job did not start is still running
    assert len(stack.running_components(stack.read_state(run_dir))) == 8


def test_a_run_that_is_not_better_leaves_the_channel(
    local_stack, tmp_path: Path, repo_root: Path
) -> None:
    """Issue 27 item 3: a No-Patch run moved `dev` from the harness it served back to the
    baseline without a word. Here `dev` serves the baseline's twin (same programs, so the same
    images and verdicts; another description, so another harness); a run whose gate cannot
    accept a patch (3 test units, fewer than the sign-flip test needs) ends on the baseline,
    which is not better: the channel stays, one line says so, summary.json records why."""
    import io

    from rich.console import Console

    from evoharness.harness import load_dir
    from evoharness_app.main_job import MainJob, MainJobOptions
    from harness_registry import NotFound
    from services.registry.client import RegistryClient

    run_dir, state = local_stack
    base = load_dir(repo_root / "harnesses" / "baseline")
    twin = base.model_copy(update={"description": base.description + " (twin)"})
    opts = stack.client_options(state)
    registry = RegistryClient(state.address("registry"), token=opts["token"] or "")
    twin_reg, _, _ = registry.put(twin, Lineage(registered_by="e2e"))
    try:
        was = registry.resolve("dev", with_document=False).registration_id
    except NotFound:  # never promoted to (this test run alone)
        was = None
    registry.promote("dev", twin_reg, expected=was)
    out = io.StringIO()
    job = MainJob(
        MainJobOptions(
            runs_dir=tmp_path / "runs",
            stack_dir=run_dir,
            run_id="e2e-keep",
            sizes=(2, 1, 1, 4),
            synthetic_count=8,
            transfer=0,
            seeds=(0, 1),
            max_rounds=1,
        ),
        console=Console(file=out, width=400),
    )
    result = job.run()
    assert result.final_harness_id == result.baseline_harness_id  # No-Patch
    assert registry.resolve("dev", with_document=False).registration_id == twin_reg
    promo = json.loads((result.run_dir / "summary.json").read_text())["promotion"]
    assert promo["move"] is False and promo["current_registration"] == twin_reg
    assert promo["candidate_rate"] == promo["current_rate"]  # same images, same verdicts
    line = f"channel dev not moved: this run's harness {promo['candidate_registration']}"
    assert line in out.getvalue(), out.getvalue()
    # the summary says the channel was not moved and why, never an empty "promoted
    # registration"; the report shows the refusal with the figures it rests on
    from evoharness_app.summary import print_summary

    printed = io.StringIO()
    print_summary(result, Console(file=printed, width=400))
    summary_text = printed.getvalue()
    assert "promoted registration" not in summary_text
    assert re.search(rf"^{re.escape(line)}.*--force-promote moves it anyway$", summary_text, re.M)
    html = result.report.read_text()
    m = re.search(r'<p class="reason" id="promotion" data-moved="false">(.*?)</p>', html, re.S)
    assert m, "the refused promotion is in the report"
    assert "not moved (refused)" in m.group(1)
    assert f'"promo-candidate">{promo["candidate_rate"]:.3f}<' in m.group(1)
    assert f'"promo-current">{promo["current_rate"]:.3f}<' in m.group(1)
    assert f"<code>{twin_reg}</code>" in m.group(1) and promo["basis"] in m.group(1)


def test_temporal_cli_start_and_evolve_status(local_stack, tmp_path: Path, capsys) -> None:
    """The README's way: `temporal workflow start --input-file params.json`, then
    `evoharness evolve status` shows the run (address from the running stack)."""
    import asyncio
    import subprocess
    import sys

    from evoharness.harness import load_dir
    from evoharness.tasks.builders import build_tasks
    from evoharness_app.cli import main
    from workflows import client as wc
    from workflows.params import Backends, EvolutionParams, HarnessRef, Splits, TaskSource
    from workflows.worker import connect

    run_dir, state = local_stack
    tasks = build_tasks("geneval", SHARED / "data" / "geneval" / "evaluation_metadata.jsonl").tasks
    params = EvolutionParams(
        run_id="cli-e2e",
        harness=HarnessRef(document=load_dir(Path("harnesses/baseline")).to_document()),
        splits=Splits(target=TaskSource(tasks=tasks[200:204])),
        seeds=[0, 1],
        max_rounds=1,
        backends=Backends(generator="grpc", verifier="grpc", proposer="grpc"),
    )
    pfile = tmp_path / "params.json"
    pfile.write_text(params.model_dump_json())
    temporal = Path(sys.executable).parent / "temporal"
    addr = state.address("temporal")
    subprocess.run(
        [
            str(temporal),
            "workflow",
            "start",
            "--address",
            addr,
            "--type",
            "EvolutionWorkflow",
            "--task-queue",
            "evoharness",
            "--workflow-id",
            "evolve-cli-e2e",
            "--input-file",
            str(pfile),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert main(["evolve", "status", "cli-e2e", "--address", addr]) == 0
    assert "cli-e2e" in capsys.readouterr().out

    async def result():
        c = await connect(addr)
        return await wc.handle(c, "cli-e2e").result()

    res = asyncio.run(result())
    assert res.run_id == "cli-e2e" and res.rounds == 1 and res.decisions


def test_promotion_runs_the_post_promotion_check(local_stack, repo_root: Path) -> None:
    """A promotion on the local stack starts PostPromotionWorkflow (issue 14 item 12): the
    worker runs both harnesses on the stack's preservation split and its metrics endpoint
    exports the regression and epsilon the dashboard's panel and the alert read."""
    import asyncio
    import urllib.request
    import uuid

    from evoharness.harness.io import load_dir
    from evoharness.harness.patch import apply_patch
    from services.registry.client import RegistryClient
    from services.registry.postpromotion import workflow_id
    from workflows.worker import connect

    run_dir, state = local_stack
    assert (run_dir / "postpromotion" / "preservation.jsonl").is_file()
    base = load_dir(repo_root / "harnesses" / "baseline")
    variant = apply_patch(
        base,
        {
            "responsibility": "policy",
            "ops": [{"op": "replace", "path": "/policy/negative_prompt", "value": "text"}],
        },
    )
    channel = f"pp-{uuid.uuid4().hex[:8]}"
    opts = stack.client_options(state)  # auth is on by default in the local stack
    client = RegistryClient(state.address("registry"), token=opts["token"] or "")
    try:
        a, _, _ = client.put(base, Lineage(registered_by="e2e"))
        b, _, _ = client.put(variant, Lineage(registered_by="e2e"))
        client.promote(channel, a, expected=None)
        client.promote(channel, b, expected=a)
    finally:
        client.close()

    async def results() -> list[Any]:
        c = await connect(state.address("temporal"))
        out = []
        for v in (1, 2):
            wid = workflow_id(channel, v)
            for _ in range(600):  # the registry starts it in the background: await the start
                try:
                    await c.get_workflow_handle(wid).describe()
                    break
                except Exception:  # noqa: BLE001 - not started yet
                    await asyncio.sleep(0.05)
            out.append(await c.get_workflow_handle(wid).result())
        return out

    first, second = asyncio.run(asyncio.wait_for(results(), 300))
    assert first["pass_rate_previous"] is None and first["regression"] == 0.0
    assert second["registration_id"] == b and second["n_tasks"] == stack.POSTPROMOTION_TASKS
    assert second["n_verdicts"] > 0 and second["pass_rate_previous"] is not None
    port = state.components["worker"].metrics_port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    got = {
        m.group(1): float(m.group(2))
        for m in re.finditer(
            rf'^(evoharness_postpromotion_(?:regression|epsilon))\{{channel="{channel}"\}} (\S+)$',
            text,
            re.MULTILINE,
        )
    }
    assert got["evoharness_postpromotion_regression"] == pytest.approx(second["regression"])
    assert got["evoharness_postpromotion_epsilon"] == pytest.approx(second["epsilon"])


def test_down_stops_everything_by_pid(local_stack) -> None:
    """Runs last in this module (pytest keeps definition order): `down` stops every PID."""
    run_dir, state = local_stack
    pids = [c.pid for c in state.components.values()]
    stopped = stack.down(run_dir)
    assert set(stopped) == set(state.components)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert stack.read_state(run_dir) is None
    assert stack.down(run_dir) == []
