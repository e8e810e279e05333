"""The KScore-style judge through the OpenAI-compatible chat client, against the scripted
chat server (tests/fixtures/fake_openai.py): a valid answer's weighted score, invalid
answers asked again, and nothing unvalidated returned."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from evoharness.kscore import KScore
from services.proposer.backends.openai_chat import ChatSettings
from services.verification.backends.kscore_judge import KScoreAnswer, KScoreJudge
from services.verification.backends.vlm import VlmSettings

PNG = b"\x89PNG\r\n\x1a\nfake"


@pytest.fixture
def judge(fake_openai, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("EVOHARNESS_LLM_API_KEY", "sk-judge")
    chat = ChatSettings(
        model="vlm-model", base_url=fake_openai.base_url, timeout_s=5, max_attempts=3, backoff_s=0
    )
    return KScoreJudge(VlmSettings(chat=chat))


def _answer(**kw: object) -> dict[str, object]:
    base = {"faithfulness": 1, "visual_correctness": 0.5, "text_accuracy": None, "aesthetics": 1}
    return {"content": json.dumps({**base, **kw})}


def test_a_valid_answer_is_weighted(fake_openai, judge) -> None:  # type: ignore[no-untyped-def]
    fake_openai.script(_answer())
    j = judge.judge(PNG, "a car in the colour of a London bus")
    assert j.kscore is not None and not j.kscore.needs_text
    # (0.1·1 + 0.4·0.5 + 0.1·1) / 0.6
    assert j.kscore.overall == pytest.approx(0.4 / 0.6)
    (req,) = fake_openai.requests()
    user = req["body"]["messages"][1]["content"]
    assert json.loads(user[0]["text"]) == {
        "prompt": "a car in the colour of a London bus",
        "prompt_needs_text": False,
    }
    assert user[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_text_prompts_are_scored_over_four(fake_openai, judge) -> None:  # type: ignore[no-untyped-def]
    fake_openai.script(_answer(text_accuracy=0, aesthetics=0.5))
    j = judge.judge(PNG, 'a shop sign that says "OPEN"')
    assert j.kscore is not None and j.kscore.needs_text
    # 0.1·1 + 0.4·0.5 + 0.4·0 + 0.1·0.5 = 0.35
    assert j.kscore.overall == pytest.approx(0.35)


def test_invalid_answers_are_asked_again_then_given_up(fake_openai, judge) -> None:  # type: ignore[no-untyped-def]
    fake_openai.script(
        {"content": "looks great"},
        _answer(faithfulness=0.7),
        _answer(text_accuracy=1),  # a text score for a prompt without text
    )
    j = judge.judge(PNG, "a red car")
    assert j.kscore is None
    assert [f.reason for f in j.failures] == ["schema"]
    assert len(fake_openai.requests()) == 3
    fake_openai.reset()
    fake_openai.script({"content": "```json\n{}\n```"}, _answer())
    j = judge.judge(PNG, "a red car")
    assert j.kscore is not None and j.kscore.overall == pytest.approx(0.4 / 0.6)
    last = fake_openai.requests()[-1]["body"]["messages"]
    assert "rejected" in last[-1]["content"]


@pytest.mark.parametrize("value", [0, 0.5, 1, 0.25, 0.7, -0.5, 2, 1.0000001])
def test_the_answer_and_the_rubric_take_the_same_levels(value: float) -> None:
    dims: dict[str, Any] = {
        "faithfulness": value,
        "visual_correctness": 1,
        "text_accuracy": None,
        "aesthetics": 1,
    }
    ok = value in (0, 0.5, 1)
    for make in (
        lambda: KScoreAnswer.model_validate(dims),
        lambda: KScore.model_validate({**dims, "needs_text": False}),
    ):
        if ok:
            assert make().faithfulness == value
        else:
            with pytest.raises(ValidationError, match="0, 0.5 or 1"):
                make()
