"""The ``Judge`` RPC's response, built and read back without a server
(``services.verification.server.judge_response``, ``client.judged_from_proto``): levels not
measured stay unset (never 0), no rubric means no level and no score, and a response whose
score does not match its levels is refused."""

from __future__ import annotations

import time

import pytest

from evoharness.kscore import KScore
from evoharness.trace.answers import FailedProposal
from evoharness.trace.roles import LlmUsage
from services.verification.client import judged_from_proto
from services.verification.judge import JudgeResult
from services.verification.server import judge_response


def test_not_measured_is_unset_and_round_trips() -> None:
    ks = KScore(
        faithfulness=0.0,
        visual_correctness=0.5,
        text_accuracy=None,
        aesthetics=None,
        needs_text=False,
    )
    res = JudgeResult(ks, False, notes=["colour of 'grass': 'a cup …' read as 'a green cup'"])
    resp = judge_response(res, "inspector", "sim", time.perf_counter())
    assert resp.HasField("faithfulness") and resp.faithfulness == 0.0  # a measured 0 is set
    assert not resp.HasField("text_accuracy") and not resp.HasField("aesthetics")
    assert resp.score == pytest.approx((0.1 * 0 + 0.4 * 0.5) / 0.5)
    back = judged_from_proto(resp)
    assert back.kscore == ks and back.score == pytest.approx(ks.overall)
    assert back.notes == res.notes


def test_no_rubric_has_no_level_and_no_score() -> None:
    fail = FailedProposal(role="judge", reason="schema", detail="faithfulness: 0.7")
    usage = LlmUsage(calls=2, prompt_tokens=10, completion_tokens=3, cost_usd=0.01, model="m")
    resp = judge_response(JudgeResult(None, True, [fail], usage=usage), "kscore", "kscore@m", 0.0)
    assert not resp.judged and not resp.HasField("score") and resp.needs_text
    assert not any(
        resp.HasField(d)
        for d in ("faithfulness", "visual_correctness", "text_accuracy", "aesthetics")
    )
    assert (resp.cost.llm_calls, resp.cost.llm_prompt_tokens) == (2, 10)
    assert resp.cost.extra["llm_cost_usd"] == pytest.approx(0.01)
    back = judged_from_proto(resp)
    assert back.kscore is None and back.score is None and back.failures == [fail]


def test_inconsistent_responses_are_refused() -> None:
    ks = KScore(
        faithfulness=1.0,
        visual_correctness=1.0,
        text_accuracy=None,
        aesthetics=None,
        needs_text=False,
    )
    resp = judge_response(JudgeResult(ks, False), "inspector", "sim", 0.0)
    resp.score = 0.5
    with pytest.raises(ValueError, match="score"):
        judged_from_proto(resp)
    resp = judge_response(JudgeResult(None, False), "kscore", "kscore@m", 0.0)
    resp.aesthetics = 0.0
    with pytest.raises(ValueError, match="judged is false"):
        judged_from_proto(resp)
    resp = judge_response(JudgeResult(ks, False), "inspector", "sim", 0.0)
    resp.faithfulness = 0.7
    with pytest.raises(ValueError, match="0, 0.5 or 1"):
        judged_from_proto(resp)
