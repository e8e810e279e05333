"""The LLM roles' prompts: Jinja2 templates under ``services/proposer/prompts/`` (one system and
one user template per role, under version control) rendered with *summarised* evidence so each
prompt fits a small model's context with room to answer.

Evidence is summarised, not dumped:

- the harness: each section with lists cut to a few items and strings to a few hundred
  characters (``summarise``); the patch proposer sees its own responsibility's section in
  more detail and the JSON schema of *that section only* (``section_schema``: its ``$defs``,
  titles and descriptions dropped) instead of the whole harness schema (~12 KB);
- a failure cluster: id, hint, type, symptom, counts and rates, the number of members and up
  to ``n_examples`` examples (prompt, subject, what was observed), never the member list.

``render`` tries decreasing detail levels (``LEVELS``) until the estimated prompt tokens fit
``budget_tokens`` and raises ``PromptTooLarge`` when even the smallest does not.

Token estimate: ``estimate_tokens`` counts ``ceil(chars / CHARS_PER_TOKEN)`` plus
``TOKENS_PER_MESSAGE`` per message (ChatML's ``<|im_start|>role\\n … <|im_end|>\\n`` framing).
``CHARS_PER_TOKEN = 3.0`` is deliberately below what SmolLM2's BPE tokenizer averages on these
prompts (JSON-heavy English; ``bench/llm_bench.py`` prints the server's own prompt-token count
beside the estimate), so the estimate errs high and a prompt that passes it fits.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

import jinja2

from evoharness.harness.patch import CONTRACTS
from evoharness.harness.schema import Harness, Responsibility
from evoharness.search.feedback import FeedbackResult, ProposerInput
from evoharness.trace.answers import ANSWER_SCHEMAS, SCORE_KEYS
from evoharness.trace.models import Attribution, FailureCluster

PROMPTS_DIR: Final = Path(__file__).parent / "prompts"
ROLES: Final = ("extractor", "localizer", "proposer")
#: The search proposer's templates (``render_search``); its answer schema is the proposer's.
SEARCH_TEMPLATES: Final = "search"
#: What each responsibility owns, as the search proposer's prompt names it.
RESPONSIBILITY_NOTES: Final = {
    "policy": "prompt compilation: template, rewrites, negative prompt, generation parameters",
    "tools": "layout planner, reference retrieval",
    "skills": "triggered documents with effects",
    "middleware": "skill routing, verify-and-repair, best-of-N",
    "memory": "guidelines and experience",
}
CHARS_PER_TOKEN: Final = 3.0
TOKENS_PER_MESSAGE: Final = 6


@dataclass(frozen=True)
class Level:
    """One detail level: examples per cluster, list items and characters per string kept."""

    n_examples: int
    max_items: int
    max_chars: int


#: Detail levels, richest first; ``render`` uses the first whose prompt fits the budget.
LEVELS: Final = (
    Level(3, 8, 400),
    Level(2, 4, 200),
    Level(1, 2, 120),
    Level(0, 1, 60),
)


class PromptTooLarge(ValueError):
    """Even the smallest rendering of a role's prompt exceeds its token budget."""


@dataclass(frozen=True)
class Rendered:
    """A rendered prompt: chat ``messages``, the estimated prompt tokens and the level used."""

    messages: list[dict[str, str]]
    est_tokens: int
    level: Level


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - plain-text chat prompts, never HTML
        keep_trailing_newline=False,
    )
    env.filters["json"] = _json
    return env


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """Estimated prompt tokens of ``messages`` (see module docstring for the rule)."""
    return sum(
        math.ceil(len(m["content"]) / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE for m in messages
    )


def summarise(value: Any, max_items: int, max_chars: int) -> Any:
    """``value`` with every list cut to ``max_items`` items (a trailing ``"… N more"`` string
    says how many were dropped) and every string to ``max_chars`` characters."""
    if isinstance(value, str):
        return value if len(value) <= max_chars else value[: max(0, max_chars - 1)] + "…"
    if isinstance(value, dict):
        return {k: summarise(v, max_items, max_chars) for k, v in value.items()}
    if isinstance(value, list | tuple):
        kept = [summarise(v, max_items, max_chars) for v in value[:max_items]]
        if len(value) > max_items:
            kept.append(f"… {len(value) - max_items} more")
        return kept
    return value


def cluster_summary(cluster: FailureCluster, level: Level) -> dict[str, Any]:
    """A cluster as the roles see it: counts, rates and up to ``level.n_examples`` examples."""
    out: dict[str, Any] = {
        "cluster_id": cluster.cluster_id,
        "responsibility_hint": cluster.responsibility_hint,
        "constraint_type": cluster.constraint_type,
        "symptom": cluster.symptom,
        "kind": cluster.kind,
        "members": len(cluster.members),
        "n_failures": cluster.n_failures,
        "failure_rate": round(cluster.failure_rate, 3),
        "flip_rate": round(cluster.flip_rate, 3),
    }
    if cluster.kind != "failure":
        out["extra_attempts"] = round(cluster.extra_attempts, 3)
    if level.n_examples:
        out["examples"] = [
            summarise(
                {k: v for k, v in ex.items() if k not in ("task_id", "constraint_id")},
                level.max_items,
                level.max_chars,
            )
            for ex in cluster.examples[: level.n_examples]
        ]
    return out


def _strip_doc(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_doc(v) for k, v in schema.items() if k not in ("title", "description")}
    if isinstance(schema, list):
        return [_strip_doc(v) for v in schema]
    return schema


@cache
def _section_schema(section: str) -> str:
    full = Harness.model_json_schema()
    defs = full.get("$defs", {})
    root = full["properties"][section]
    keep: dict[str, Any] = {}
    todo = [root]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.removeprefix("#/$defs/")
                if name not in keep:
                    keep[name] = defs[name]
                    todo.append(defs[name])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    out = dict(_strip_doc(root))
    if keep:
        out["$defs"] = _strip_doc(keep)
    return _json(out)


@cache
def _answer_schema(role: str) -> str:
    return _json(_strip_doc(ANSWER_SCHEMAS[role]))


def answer_schema(role: str) -> dict[str, Any]:
    """The JSON schema a role's answer must match, as its prompt shows it: the validator's
    schema (``evoharness.trace.answers.ANSWER_SCHEMAS``) without titles and descriptions,
    which constrain nothing."""
    return dict(json.loads(_answer_schema(role)))


def section_schema(responsibility: str) -> dict[str, Any]:
    """The JSON schema of one harness section (``policy``, ``tools``…) with only the
    ``$defs`` it references, titles and descriptions dropped. Raises ``KeyError`` for an
    unknown section."""
    return dict(json.loads(_section_schema(responsibility)))


def _messages(role: str, **values: Any) -> list[dict[str, str]]:
    env = _env()
    return [
        {"role": "system", "content": env.get_template(f"{role}.system.md").render(**values)},
        {"role": "user", "content": env.get_template(f"{role}.user.md").render(**values)},
    ]


def _fit(role: str, budget_tokens: int, build: Any) -> Rendered:
    smallest = 0
    for level in LEVELS:
        msgs = build(level)
        est = estimate_tokens(msgs)
        if est <= budget_tokens:
            return Rendered(msgs, est, level)
        smallest = est
    raise PromptTooLarge(
        f"the {role} prompt needs about {smallest} tokens at its smallest, over its budget "
        f"of {budget_tokens} (fewer clusters per call, or a model with a longer context)"
    )


def render_extractor(prompt: str, budget_tokens: int) -> Rendered:
    """The policy extractor's messages for ``prompt``. Raises ``PromptTooLarge``."""

    def build(level: Level) -> list[dict[str, str]]:
        return _messages(
            "extractor",
            schema=answer_schema("extractor"),
            prompt=summarise(prompt, 1, level.max_chars * 10),
        )

    return _fit("extractor", budget_tokens, build)


def render_localizer(
    clusters: list[FailureCluster],
    harness: Harness,
    budget_tokens: int,
    context: dict[str, Any] | None = None,
) -> Rendered:
    """The localizer's messages for ``clusters`` of ``harness``. Raises ``PromptTooLarge``."""

    def build(level: Level) -> list[dict[str, str]]:
        return _messages(
            "localizer",
            keys=SCORE_KEYS,
            schema=answer_schema("localizer"),
            harness=summarise(harness.to_document(), level.max_items, level.max_chars),
            cluster_ids=[c.cluster_id for c in clusters],
            clusters=[cluster_summary(c, level) for c in clusters],
            n_examples=level.n_examples,
            context=summarise(context or {}, level.max_items, level.max_chars),
        )

    return _fit("localizer", budget_tokens, build)


def render_proposer(
    cluster: FailureCluster,
    attribution: Attribution,
    harness: Harness,
    responsibility: str,
    n: int,
    budget_tokens: int,
    context: dict[str, Any] | None = None,
) -> Rendered:
    """The patch proposer's messages. Raises ``PromptTooLarge`` (and ``KeyError`` for an
    unknown responsibility)."""
    doc = harness.to_document()
    prefixes = CONTRACTS[Responsibility(responsibility)]

    def build(level: Level) -> list[dict[str, str]]:
        rest = {k: v for k, v in doc.items() if k != responsibility}
        return _messages(
            "proposer",
            n=n,
            responsibility=responsibility,
            prefixes=list(prefixes),
            section_schema=section_schema(responsibility),
            schema=answer_schema("proposer"),
            section=summarise(doc[responsibility], level.max_items * 4, level.max_chars * 4),
            harness=summarise(rest, level.max_items, level.max_chars),
            cluster=cluster_summary(cluster, level),
            n_examples=level.n_examples,
            attribution={
                "chosen": attribution.chosen,
                "scores": {k: round(v, 3) for k, v in attribution.scores.items()},
                "reasons": summarise(list(attribution.reasons), 3, level.max_chars),
            },
            context=summarise(context or {}, level.max_items, level.max_chars),
        )

    return _fit("proposer", budget_tokens, build)


#: What the search proposer sees of a failing feedback verdict (no task id, seed or
#: constraint id: they name nothing the model could act on).
_FAILURE_FIELDS: Final = {"prompt", "constraint_type", "subject", "status", "reason"}


def feedback_summary(fb: FeedbackResult, level: Level) -> dict[str, Any]:
    """A harness's feedback-split results as the search proposer sees them: pass rate,
    verdicts, the most failed constraint types and up to ``level.max_items`` failing
    constraints (prompt, constraint type and subject, status, the verifier's reason)."""
    out: dict[str, Any] = {
        "pass_rate": round(fb.pass_rate, 3),
        "n_verdicts": fb.n_verdicts,
        "n_failures_shown": len(fb.failures),
        "failing_types": fb.failing_types[: level.max_items],
    }
    if level.n_examples:
        out["failures"] = [
            summarise(
                f.model_dump(mode="json", include=_FAILURE_FIELDS), level.max_items, level.max_chars
            )
            for f in fb.failures[: level.max_items]
        ]
    return out


def history_summary(fb: FeedbackResult, level: Level) -> dict[str, Any]:
    """An earlier candidate as the search proposer sees it: its id, parent, why it was made
    (the patch's rationale), feedback pass rate and up to 3 most failed constraint types."""
    return {
        "harness_id": fb.harness_id[:12],
        "parent_id": fb.parent_id[:12],
        "rationale": summarise(fb.rationale, 1, level.max_chars),
        "pass_rate": round(fb.pass_rate, 3),
        "failing_types": fb.failing_types[:3],
    }


def render_search(view: ProposerInput, n: int, budget_tokens: int) -> Rendered:
    """The search proposer's messages for ``view`` (the parent harness, its feedback-split
    results, the latest ``level.max_items`` earlier candidates): up to ``n`` whole-harness
    patches, each for one responsibility. The sections' JSON schemas are shown at the
    richest level only. Raises ``PromptTooLarge``."""
    doc = view.parent.to_document()
    responsibilities = [r.value for r in Responsibility]

    def build(level: Level) -> list[dict[str, str]]:
        richest = level == LEVELS[0]
        history = view.history[-level.max_items :] if level.max_items else ()
        return _messages(
            SEARCH_TEMPLATES,
            n=n,
            prefixes={r: list(CONTRACTS[Responsibility(r)]) for r in responsibilities},
            roles=RESPONSIBILITY_NOTES,
            schemas={r: section_schema(r) for r in responsibilities} if richest else {},
            schema=answer_schema("proposer"),
            iteration=view.iteration,
            harness=summarise(doc, level.max_items * 2, level.max_chars * 2),
            parent_feedback=feedback_summary(view.parent_feedback, level)
            if view.parent_feedback is not None
            else None,
            n_failures=level.max_items if level.n_examples else 0,
            history=[history_summary(fb, level) for fb in history],
        )

    return _fit(SEARCH_TEMPLATES, budget_tokens, build)


__all__ = [
    "CHARS_PER_TOKEN",
    "RESPONSIBILITY_NOTES",
    "SEARCH_TEMPLATES",
    "LEVELS",
    "PROMPTS_DIR",
    "ROLES",
    "Level",
    "PromptTooLarge",
    "Rendered",
    "answer_schema",
    "cluster_summary",
    "estimate_tokens",
    "feedback_summary",
    "history_summary",
    "render_search",
    "render_extractor",
    "render_localizer",
    "render_proposer",
    "section_schema",
    "summarise",
]
