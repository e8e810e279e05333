"""The LLM search proposer of ``autoref`` (issue 31, ``evoharness.search.llm``) through a real
``evoharness serve proposer`` process with the OpenAI-compatible backend, answered by the
scripted chat server (tests/fixtures/fake_openai.py): a good answer gives checked
whole-harness patches, a malformed one gives none and a recorded reason (never an exception,
never a crashed search), and what reaches the model holds feedback results and no selection
result. Candidates run in the unit world of ``tests/unit/_trace_world.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evoharness.harness.io import harness_id
from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Harness
from evoharness.search.feedback import ProposerInput, feedback_of
from evoharness.search.llm import LlmSearchProposer
from evoharness.search.protocols import SearchConfig, SearchPorts, SplitManifest, run_search
from evoharness.tasks.models import Task
from services.proposer.client import ProposerClient
from tests.unit._trace_world import LAYOUT_OP, compile_program, execute, task
from workflows.backends import PROPOSER_SERVICE_ERRORS

SEEDS = (0, 1)
FEEDBACK = [
    task(
        f"fb{i}",
        f"{i + 2} cats beside an orange lamp",
        ("c0", "count", {"subject": "cat", "min_count": i + 2}),
        ("c1", "color", {"subject": "lamp", "value": "orange"}),
    )
    for i in range(2)
]
#: prompts and subjects that appear nowhere else: a trace of them in a request is a leak
SELECTION = [
    task(
        f"sel{i}",
        f"{i + 3} giraffes under a violet umbrella",
        ("c0", "count", {"subject": "giraffe", "min_count": i + 3}),
        ("c1", "color", {"subject": "umbrella", "value": "violet"}),
    )
    for i in range(2)
]
POLICY_OP = {"op": "add", "path": "/policy/rewrites/-", "value": {"kind": "move_negations"}}
MIDDLEWARE_OP = {
    "op": "add",
    "path": "/middleware/stages/-",
    "value": {"kind": "best_of_n", "n": 2},
}
GOOD = json.dumps(
    {
        "patches": [
            {"responsibility": "tools", "ops": [LAYOUT_OP], "rationale": "plan the layout"},
            {"responsibility": "middleware", "ops": [MIDDLEWARE_OP], "rationale": "two tries"},
        ]
    }
)
#: (answer, the validator's reason): bad JSON, an op on a path the harness schema does not
#: have, a responsibility that does not exist
MALFORMED = [
    ('{"patches": [{"responsibility": "policy", "ops": [{"op": "add", "pa', "invalid_json"),
    (
        json.dumps(
            {
                "patches": [
                    {
                        "responsibility": "policy",
                        "ops": [{"op": "add", "path": "/policy/generator", "value": "sdxl"}],
                    }
                ]
            }
        ),
        "harness_schema",
    ),
    (
        json.dumps({"patches": [{"responsibility": "camera", "ops": [POLICY_OP]}]}),
        "schema",
    ),
]


@pytest.fixture(scope="module")
def service(service_factory: Any, fake_openai_server: Any) -> Any:
    """A proposer service over the fake chat server: two attempts per request, no backoff."""
    return service_factory(
        "proposer",
        {
            "backend": "openai",
            "prices_path": "configs/prices.yaml",
            "openai": {
                "model": "gpt-4o-mini",
                "base_url": fake_openai_server.base_url,
                "timeout_s": 5.0,
                "max_attempts": 2,
                "backoff_s": 0.0,
            },
        },
        env={"EVOHARNESS_LLM_API_KEY": "sk-search-test"},
    )


def _view(iteration: int = 1) -> ProposerInput:
    """The start's view after step 0: its feedback-split results in the unit world."""
    h = Harness()
    manifest = SplitManifest.of(FEEDBACK, SELECTION)
    execs = [execute(h, t, s) for t in FEEDBACK for s in SEEDS]
    fb = feedback_of(harness_id(h), execs, {t.task_id: t for t in FEEDBACK}, manifest)
    return ProposerInput(iteration=iteration, parent=h, parent_feedback=fb, history=(fb,))


def _search(proposer: LlmSearchProposer, feedback: list[Task] = FEEDBACK) -> Any:
    cfg = SearchConfig(protocol="autoref", seeds=SEEDS, iterations=1, concurrency=1)
    ports = SearchPorts(execute, compile_program)
    return run_search(cfg, ports, Harness(), feedback, SELECTION, proposer=proposer)


def test_a_good_answer_gives_checked_whole_harness_patches(service: Any, fake_openai: Any) -> None:
    fake_openai.script({"content": GOOD, "prompt_tokens": 900, "completion_tokens": 80})
    view = _view()
    with ProposerClient(service.address) as client:
        prop = LlmSearchProposer(client.propose_search, errors=PROPOSER_SERVICE_ERRORS)
        patches = prop(view, 4)
    assert [(p.responsibility.value, p.ops) for p in patches] == [
        ("tools", [LAYOUT_OP]),
        ("middleware", [MIDDLEWARE_OP]),
    ]
    children = {harness_id(apply_patch(view.parent, p)) for p in patches}
    assert len(children) == 2 and harness_id(view.parent) not in children
    assert prop.take_failures() == []
    assert (prop.usage.calls, prop.usage.prompt_tokens, prop.usage.model) == (1, 900, "gpt-4o-mini")
    (req,) = fake_openai.requests()
    schema = req["body"]["response_format"]["json_schema"]["schema"]
    # any of the five responsibilities, one per patch
    assert schema["$defs"]["PatchItem"]["properties"]["responsibility"]["enum"] == [
        "policy",
        "tools",
        "skills",
        "middleware",
        "memory",
    ]
    system = req["body"]["messages"][0]["content"]
    assert "text-to-image" in system and "up to 4 distinct patches" in system
    assert "simulat" not in json.dumps(req["body"]["messages"]).lower()


@pytest.mark.parametrize(("answer", "reason"), MALFORMED, ids=[r for _, r in MALFORMED])
def test_a_malformed_answer_gives_no_patch_and_a_recorded_reason(
    service: Any, fake_openai: Any, answer: str, reason: str
) -> None:
    fake_openai.script({"content": answer}, {"content": answer})  # asked twice (max_attempts)
    with ProposerClient(service.address) as client:
        prop = LlmSearchProposer(client.propose_search, errors=PROPOSER_SERVICE_ERRORS)
        assert prop(_view(), 3) == []
        failures = prop.take_failures()
    assert [f.reason for f in failures] == [reason]
    assert failures[0].role == "search_proposer" and failures[0].detail
    assert len(fake_openai.requests()) == 2  # re-asked once with the reasons, then given up
    assert prop.take_failures() == []  # taken once


def test_a_malformed_answer_is_recorded_and_the_search_goes_on(
    service: Any, fake_openai: Any
) -> None:
    answer, reason = MALFORMED[0]
    fake_openai.script({"content": answer}, {"content": answer})
    with ProposerClient(service.address) as client:
        run = _search(LlmSearchProposer(client.propose_search, errors=PROPOSER_SERVICE_ERRORS))
    assert run.stopped == "1 iterations" and [p.iteration for p in run.points] == [0, 1]
    (rec,) = run.candidates
    assert rec.check.startswith(f"proposer_{reason}: ") and rec.harness_id == ""
    assert run.points[-1].best_harness_id == harness_id(Harness())


def test_an_unreachable_service_is_recorded_not_raised() -> None:
    with ProposerClient("127.0.0.1:9", timeout=2.0) as client:
        prop = LlmSearchProposer(client.propose_search, errors=PROPOSER_SERVICE_ERRORS)
        assert prop(_view(), 2) == []
    (f,) = prop.take_failures()
    assert f.reason == "backend_error" and "iteration 1" in f.detail


def test_the_model_sees_feedback_results_and_no_selection_result(
    service: Any, fake_openai: Any
) -> None:
    fake_openai.script({"content": GOOD})
    with ProposerClient(service.address) as client:
        run = _search(LlmSearchProposer(client.propose_search, errors=PROPOSER_SERVICE_ERRORS))
    assert [c.check for c in run.candidates] == ["ok", "ok"]
    assert all(c.selection_score is not None for c in run.candidates)  # ranked on selection
    (req,) = fake_openai.requests()
    sent = json.dumps(req["body"]["messages"])
    assert "orange lamp" in sent and "pass_rate" in sent  # the feedback split's results
    for word in ("giraffe", "violet", "umbrella", "sel0", "sel1", "selection"):
        assert word not in sent, word


def test_the_search_step_activity_reaches_the_llm_proposer_through_grpc(
    service: Any, fake_openai: Any, tmp_path: Any
) -> None:
    """``proposer: grpc`` in an ``autoref`` run: the search step activity builds the LLM
    search proposer over the worker's proposer client (the embedded sim world runs the
    candidates); the answer's patches become checked candidates, the refused one is recorded,
    and the step's report is stored. (An unknown responsibility fails the whole answer's
    schema, ``test_a_malformed_answer_gives_no_patch_and_a_recorded_reason``; an op outside
    its patch's contract fails that patch alone.)"""
    from temporalio.testing import ActivityEnvironment

    from evoharness.search.protocols import new_search
    from workflows.activities import TraceActivities
    from workflows.backends import WorkerSection, WorkerSettings
    from workflows.params import Backends
    from workflows.search_activities import SearchActivities, SearchStepRequest
    from workflows.store_keys import search_report_key

    bad = {"responsibility": "tools", "ops": [POLICY_OP]}  # writes outside its contract
    answer = json.dumps({"patches": [*json.loads(GOOD)["patches"], bad]})
    fake_openai.script({"content": answer})
    settings = WorkerSettings(
        worker=WorkerSection(
            store="local", local_dir=str(tmp_path), proposer_address=service.address
        )
    )
    acts = TraceActivities(settings)
    search = SearchActivities(acts)
    cfg = SearchConfig(protocol="autoref", seeds=(0,), iterations=1, concurrency=1)
    state = new_search(cfg, FEEDBACK, SELECTION)
    env = ActivityEnvironment()
    for _ in range(2):  # step 0: the start; step 1: one iteration, one LLM call
        req = SearchStepRequest(
            run_id="llm-search",
            state=state,
            start=Harness(),
            feedback=FEEDBACK,
            selection=SELECTION,
            backends=Backends(proposer="grpc"),
            proposer="grpc",
        )
        state = env.run(search.search_step, req).state
    assert state.done and len(fake_openai.requests()) == 1
    checks = [c.check for c in state.run.candidates]
    assert checks[0].startswith("proposer_contract: patches[2]")
    assert [c.patch["responsibility"] for c in state.run.candidates[1:] if c.patch] == [
        "tools",
        "middleware",
    ]
    stored = acts.store.get(search_report_key("llm-search"))
    assert json.loads(stored)["candidates"][0]["check"] == checks[0]


def test_an_unknown_search_proposer_is_bad_input(tmp_path: Any) -> None:
    from temporalio.exceptions import ApplicationError

    from workflows.activities import TraceActivities
    from workflows.backends import WorkerSection, WorkerSettings
    from workflows.search_activities import SearchActivities

    acts = TraceActivities(
        WorkerSettings(worker=WorkerSection(store="local", local_dir=str(tmp_path)))
    )
    with pytest.raises(ApplicationError, match="no search proposer 'nope'") as err:
        SearchActivities(acts)._llm("nope")
    assert err.value.non_retryable


def test_a_rule_backend_service_is_recorded_as_a_backend_error(service_factory: Any) -> None:
    """The rule backend has no search role: FAILED_PRECONDITION, recorded, not raised."""
    rule = service_factory("proposer", {"backend": "rule"})
    with ProposerClient(rule.address) as client:
        prop = LlmSearchProposer(client.propose_search, errors=PROPOSER_SERVICE_ERRORS)
        assert prop(_view(), 2) == []
    (f,) = prop.take_failures()
    assert f.reason == "backend_error" and "has no search proposer" in f.detail
