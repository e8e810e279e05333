"""The LLM roles' prompt files (services/proposer/prompts/) rendered with real evidence: failure
clusters from simulator runs of GenEval prompts through the baseline and the hand-tuned
reference harness, and the longest prompts of GenEval, PartiPrompts and T2I-CompBench. Each
rendering must fit the local model's prompt budget (8k context less the answer's room), with
the token count estimated without the model (``services.proposer.prompting.estimate_tokens``);
the local server's own counts are printed beside the estimate by ``bench/llm_bench.py``."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from evoharness.harness.io import harness_id, load_dir
from evoharness.search.feedback import ProposerInput, SplitManifest, feedback_of
from evoharness.tasks.builders import build_geneval
from evoharness.trace.aggregate import aggregate
from evoharness.trace.answers import ANSWER_SCHEMAS
from evoharness.trace.cluster import cluster_failures, cost_clusters
from evoharness.trace.rule_proposer import localize
from services.llm_local import LOCAL_MAX_TOKENS, LOCAL_N_CTX
from services.proposer.backends.openai_chat import ChatSettings
from services.proposer.prompting import (
    LEVELS,
    PROMPTS_DIR,
    ROLES,
    PromptTooLarge,
    answer_schema,
    render_extractor,
    render_localizer,
    render_proposer,
    render_search,
    section_schema,
)
from tests.unit import _sim_world

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [0, 1]
#: the local model's settings, as ``services.llm_local.proposer_env`` configures them
LOCAL = ChatSettings(context_tokens=LOCAL_N_CTX, max_tokens=LOCAL_MAX_TOKENS)
BUDGET = LOCAL.prompt_budget


@pytest.fixture(scope="module")
def evidence(shared_dir):
    """Clusters from the simulator on two GenEval prompts of each family, baseline harness,
    two seeds (24 executions: colour leaks, missing objects, wrong relations and counts)."""
    tasks = build_geneval(shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl")
    by_family: dict[str, list] = {}
    for t in tasks:
        by_family.setdefault(t.task_family, []).append(t)
    picked = [t for fam in sorted(by_family) for t in by_family[fam][:2]]
    h = _sim_world.baseline()
    execs = [_sim_world.execute(h, t, s) for t in picked for s in SEEDS]
    stats = aggregate(execs, picked, SEEDS)
    clusters = cluster_failures(stats, picked, execs) + cost_clusters(stats, picked, execs)
    assert len(clusters) >= 3, "the evidence should hold several clusters"
    return clusters


@pytest.fixture(scope="module")
def harnesses():
    return {
        "baseline": load_dir(ROOT / "harnesses" / "baseline"),
        "reference": load_dir(ROOT / "harnesses" / "reference"),
    }


def _longest_prompts(shared_dir: Path) -> list[str]:
    data = shared_dir / "data"
    parti = [
        line.split("\t")[0]
        for line in (data / "partiprompts" / "PartiPrompts.tsv").read_text().splitlines()[1:]
    ]
    comp = (data / "t2icompbench" / "complex_train.txt").read_text().splitlines()
    gen = [
        json.loads(x)["prompt"]
        for x in (data / "geneval" / "evaluation_metadata.jsonl").read_text().splitlines()
        if x.strip()
    ]
    return [max(src, key=len) for src in (parti, comp, gen)]


def test_every_role_has_its_prompt_files():
    for role in ROLES:
        for part in ("system", "user"):
            assert (PROMPTS_DIR / f"{role}.{part}.md").is_file()


def test_extractor_prompt_fits_with_the_longest_dataset_prompts(shared_dir):
    for prompt in _longest_prompts(shared_dir):
        r = render_extractor(prompt, BUDGET)
        assert r.est_tokens <= BUDGET and r.level == LEVELS[0]
        assert json.loads(r.messages[1]["content"]) == {"prompt": prompt}
        # the schema shown is the validator's (documentation keys dropped)
        shown = json.dumps(answer_schema("extractor"), sort_keys=True, separators=(",", ":"))
        assert shown in r.messages[0]["content"]


def test_localizer_prompt_with_real_clusters_fits_the_budget(evidence, harnesses):
    for h in harnesses.values():
        r = render_localizer(evidence, h, BUDGET)
        assert r.est_tokens <= BUDGET
        user = r.messages[1]["content"]
        for c in evidence:
            assert c.cluster_id in user
        # summarised, not dumped: no member list, examples capped by the level
        assert '"members":[' not in user
        assert user.count('"subject"') <= len(evidence) * r.level.n_examples


def test_proposer_prompt_with_real_clusters_fits_the_budget(evidence, harnesses):
    attributions = {a.cluster_id: a for a in localize(evidence, harnesses["reference"])}
    for h in harnesses.values():
        for c in evidence:
            for resp in ("policy", "tools", "skills", "middleware", "memory"):
                r = render_proposer(c, attributions[c.cluster_id], h, resp, 3, BUDGET)
                assert r.est_tokens <= BUDGET, (c.cluster_id, resp, r.est_tokens)
                system = r.messages[0]["content"]
                # only this section's schema, never the whole harness schema
                assert (
                    json.dumps(section_schema(resp), sort_keys=True, separators=(",", ":"))
                    in system
                )
                assert '"$defs":{"BestOfNStage"' not in system or resp == "middleware"
                assert f'"{resp}"' in r.messages[1]["content"]


@pytest.fixture(scope="module")
def search_views(shared_dir, harnesses):
    """A search proposer's view of each shipped harness: its feedback-split results from the
    simulator on three GenEval prompts of each family (two seeds), and a history of 30
    earlier candidates."""
    tasks = build_geneval(shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl")
    by_family: dict[str, list] = {}
    for t in tasks:
        by_family.setdefault(t.task_family, []).append(t)
    picked = [t for fam in sorted(by_family) for t in by_family[fam][:3]]
    manifest = SplitManifest(feedback=tuple(t.task_id for t in picked), selection=("held-out",))
    views = {}
    for name, h in harnesses.items():
        execs = [_sim_world.execute(h, t, s) for t in picked for s in SEEDS]
        fb = feedback_of(harness_id(h), execs, {t.task_id: t for t in picked}, manifest)
        history = tuple(
            fb.model_copy(update={"harness_id": f"{i:064x}", "rationale": "x" * 500})
            for i in range(30)
        )
        views[name] = ProposerInput(iteration=3, parent=h, parent_feedback=fb, history=history)
    return views


def test_search_prompt_with_real_feedback_fits_the_budget(search_views):
    for view in search_views.values():
        assert view.parent_feedback is not None and view.parent_feedback.failures
        r = render_search(view, 4, BUDGET)
        assert r.est_tokens <= BUDGET
        system, user = r.messages[0]["content"], r.messages[1]["content"]
        assert "text-to-image" in system and "/middleware" in system
        # the proposer's answer schema, any of the five responsibilities
        shown = json.dumps(answer_schema("proposer"), sort_keys=True, separators=(",", ":"))
        assert shown in system
        # feedback summarised: failures and history capped by the level
        assert user.count('"reason"') <= r.level.max_items
        assert user.count('"harness_id"') <= r.level.max_items
        assert view.parent_feedback.failures[0].subject in user
        # text-to-image generation only: the world the feedback came from is never named
        assert "simulat" not in (system + user).lower()


def test_over_budget_evidence_is_shrunk_then_refused(evidence, harnesses):
    h = harnesses["reference"]
    full = render_localizer(evidence, h, BUDGET)
    smaller = render_localizer(evidence, h, full.est_tokens - 1)
    assert smaller.est_tokens < full.est_tokens and smaller.level != full.level
    with pytest.raises(PromptTooLarge, match="localizer prompt needs about"):
        render_localizer(evidence * 40, h, 500)


def test_prompt_schema_is_the_validator_schema():
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in ("title", "description")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    for role in ROLES:
        assert answer_schema(role) == strip(ANSWER_SCHEMAS[role])


def test_make_llm_venv_installs_the_llm_local_extra():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["llm-local"]
    line = re.search(r"^LLM_PACKAGES := (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert line is not None
    assert re.findall(r'"([^"]+)"', line.group(1)) == extra
