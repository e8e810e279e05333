"""Budget estimate of an evolution run, before anything is called.

``estimate_budget(config)`` counts, per round (docs/architecture.md, "The TRACE round"):

- **execute**: the parent on every target task × K analysis seeds (they choose the clusters)
  and on every preservation task × K (they select the preservation set,
  ``trace.preservation``);
- **validate**: on K fresh seeds (``gates.validation_seeds``), the parent and each candidate on
  target + held-out + preservation;
- **further looks**: a candidate whose gate asks for another look runs the target and
  held-out splits (the gate's test units, ``gates.GateConfig.test_splits``) on K more fresh
  seeds, beside the parent, up to ``further_looks`` times (``GateConfig.max_looks`` − 1: 1
  under the default two-look rule, 2 under alpha spending); ``second_look_share`` of those
  executions are expected (0.25 under the default rule; 0.5 under alpha spending, where in the
  power model a useless patch takes at least one further look in 62% of runs, a useful one
  in 98%, ``bench/gate_power.py``); the upper bound assumes every candidate and the parent
  take every look;
- each execution makes ``generator_calls_per_execution`` generator calls (best-of-N × (1 +
  repair budget) at most) and as many verifier calls;
- the LLM proposer makes one localizer call per round and one proposal call per cluster;
- **beam**: every round after the first expands up to ``beam`` parents (``trace.beam``), each
  a whole round as above (the upper bound assumes ``beam`` parents; the expected figure
  too, less the cache hits).

The **upper bound** assumes no cache hit. The **expected** figure applies the
content-addressed cache: from round 2 on the parent's validation executions were already made
when it was validated as a candidate on the same fresh seeds (all hits; its analysis-seed
executions are new), and a share ``expected_cache_hit_rate`` of candidate validation
executions hit (patches leave most tasks' programs unchanged).

Money comes from the price table ``configs/prices.yaml`` when present (keys below; missing keys
keep the defaults), else from ``DEFAULT_PRICES``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

#: Default prices (USD). Generator-second: an on-demand H100 at about $3/h ≈ $0.00083/s.
#: LLM tokens: a small hosted chat model's list price per 1k tokens.
DEFAULT_PRICES: dict[str, float] = {
    "generator_second_usd": 3.0 / 3600.0,
    "verifier_call_usd": 0.0,
    "llm_prompt_per_1k_usd": 0.00015,
    "llm_completion_per_1k_usd": 0.0006,
}


class Prices(BaseModel):
    """Unit prices in USD (``load_prices``: ``configs/prices.yaml``, else ``DEFAULT_PRICES``)."""

    model_config = ConfigDict(extra="ignore")

    generator_second_usd: float = DEFAULT_PRICES["generator_second_usd"]
    verifier_call_usd: float = DEFAULT_PRICES["verifier_call_usd"]
    llm_prompt_per_1k_usd: float = DEFAULT_PRICES["llm_prompt_per_1k_usd"]
    llm_completion_per_1k_usd: float = DEFAULT_PRICES["llm_completion_per_1k_usd"]

    def generator_usd(self, generator_seconds: float, generator_calls: float) -> float:
        """USD of the image side of a run: ``generator_seconds`` (seconds of generator time)
        × ``generator_second_usd`` + ``generator_calls`` × ``verifier_call_usd`` (every
        generated image is verified once, so verifier calls = generator calls). The one
        formula of the budget estimate, the run budget and the workflows' round and search
        costs; LLM tokens are priced apart."""
        return (
            generator_seconds * self.generator_second_usd + generator_calls * self.verifier_call_usd
        )

    def llm_usd(self, prompt_tokens: float, completion_tokens: float) -> float:
        """USD of LLM tokens: ``prompt_tokens`` / 1000 × ``llm_prompt_per_1k_usd`` +
        ``completion_tokens`` / 1000 × ``llm_completion_per_1k_usd`` (per-1k list prices).
        The one token pricing formula of the budget estimate and the workflows' proposer
        usage (when the proposer service reported no price of its own)."""
        return (
            prompt_tokens / 1000.0 * self.llm_prompt_per_1k_usd
            + completion_tokens / 1000.0 * self.llm_completion_per_1k_usd
        )


def _find(doc: Any, *names: str) -> float | None:
    """First numeric value under any of ``names`` anywhere in a nested mapping."""
    if isinstance(doc, dict):
        for n in names:
            v = doc.get(n)
            if isinstance(v, int | float) and not isinstance(v, bool):
                return float(v)
        for v in doc.values():
            found = _find(v, *names)
            if found is not None:
                return found
    return None


def load_prices(path: str | Path | None = None) -> Prices:
    """Read the price table. ``path`` None → ``configs/prices.yaml`` next to the working
    directory when it exists, else the defaults. Recognised keys (anywhere in the YAML):
    ``generator_second_usd`` / ``usd_per_generator_second``, ``verifier_call_usd``,
    ``llm_prompt_per_1k_usd`` / ``prompt_usd_per_1k``, ``llm_completion_per_1k_usd`` /
    ``completion_usd_per_1k`` (per-1M variants ``prompt_usd_per_1m`` etc. are divided by 1000).
    Raises ``ValueError`` naming the file when it is not valid YAML."""
    p = Path(path) if path is not None else Path("configs/prices.yaml")
    if not p.is_file():
        if path is not None:
            raise ValueError(f"price table {p} does not exist")
        return Prices()
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{p}: not valid YAML: {exc}") from None
    out = Prices().model_dump()
    for field, names in {
        "generator_second_usd": ("generator_second_usd", "usd_per_generator_second"),
        "verifier_call_usd": ("verifier_call_usd", "usd_per_verifier_call"),
        "llm_prompt_per_1k_usd": ("llm_prompt_per_1k_usd", "prompt_usd_per_1k"),
        "llm_completion_per_1k_usd": ("llm_completion_per_1k_usd", "completion_usd_per_1k"),
    }.items():
        v = _find(doc, *names)
        if v is not None:
            out[field] = v
    for field, name in (
        ("llm_prompt_per_1k_usd", "prompt_usd_per_1m"),
        ("llm_completion_per_1k_usd", "completion_usd_per_1m"),
    ):
        v = _find(doc, name)
        if v is not None:
            out[field] = v / 1000.0
    return Prices(**out)


class BudgetConfig(BaseModel):
    """What the estimate needs. Counts are tasks per split; ``seeds`` is K."""

    model_config = ConfigDict(extra="forbid")

    n_target: int = Field(ge=1)
    n_heldout: int = Field(default=0, ge=0)
    n_preservation: int = Field(default=0, ge=0)
    seeds: int = Field(default=4, ge=1)
    rounds: int = Field(default=3, ge=1)
    max_clusters: int = Field(default=3, ge=1)
    candidates_per_cluster: int = Field(default=2, ge=1)
    generator_calls_per_execution: float = Field(default=1.0, ge=1.0)
    generator_seconds_per_call: float = Field(default=2.0, ge=0.0)
    proposer: Literal["rule", "llm"] = "rule"
    llm_prompt_tokens_per_call: int = Field(default=3000, ge=0)
    llm_completion_tokens_per_call: int = Field(default=600, ge=0)
    expected_cache_hit_rate: float = Field(default=0.5, ge=0.0, le=1.0)
    second_look_share: float = Field(default=0.25, ge=0.0, le=1.0)
    further_looks: int = Field(default=1, ge=0, le=2)
    beam: int = Field(default=1, ge=1)
    prices_path: str | None = None


class BudgetFigures(BaseModel):
    """Counts and money for one scenario (upper bound or expected)."""

    generator_calls: float
    verifier_calls: float
    generator_seconds: float
    llm_calls: float
    llm_prompt_tokens: float
    llm_completion_tokens: float
    cost_usd: float


class BudgetEstimate(BaseModel):
    """``upper`` (no cache hit) and ``expected`` (with cache hits), plus the prices used."""

    upper: BudgetFigures
    expected: BudgetFigures
    prices: Prices
    per_round_executions: dict[str, float]


def _figures(executions: float, cfg: BudgetConfig, prices: Prices) -> BudgetFigures:
    gen = executions * cfg.generator_calls_per_execution
    secs = gen * cfg.generator_seconds_per_call
    parents = 1 + (cfg.rounds - 1) * cfg.beam  # parent-rounds: one in round 1, B after
    llm = parents * (1 + cfg.max_clusters) if cfg.proposer == "llm" else 0
    pt = llm * cfg.llm_prompt_tokens_per_call
    ct = llm * cfg.llm_completion_tokens_per_call
    cost = prices.generator_usd(secs, gen) + prices.llm_usd(pt, ct)
    return BudgetFigures(
        generator_calls=gen,
        verifier_calls=gen,
        generator_seconds=secs,
        llm_calls=llm,
        llm_prompt_tokens=pt,
        llm_completion_tokens=ct,
        cost_usd=cost,
    )


def estimate_budget(config: BudgetConfig, prices: Prices | None = None) -> BudgetEstimate:
    """Estimate generator/verifier/LLM calls, tokens, generator-seconds and USD of a run.
    See the module docstring for the counting rules. ``prices`` overrides the table."""
    pr = prices or load_prices(config.prices_path)
    k = config.seeds
    all_tasks = config.n_target + config.n_heldout + config.n_preservation
    n_cand = config.max_clusters * config.candidates_per_cluster
    execute = (config.n_target + config.n_preservation) * k
    parent_val = all_tasks * k
    cand_val = n_cand * all_tasks * k
    second_upper = config.further_looks * (1 + n_cand) * (config.n_target + config.n_heldout) * k
    second_exp = config.second_look_share * second_upper if n_cand else 0.0
    later = (config.rounds - 1) * config.beam  # parent-rounds after the first round
    upper = (1 + later) * (execute + parent_val + cand_val + second_upper)
    h = config.expected_cache_hit_rate
    expected = (execute + parent_val + cand_val * (1 - h) + second_exp) + later * (
        execute + cand_val * (1 - h) + second_exp
    )
    return BudgetEstimate(
        upper=_figures(upper, config, pr),
        expected=_figures(expected, config, pr),
        prices=pr,
        per_round_executions={
            "execute": float(execute),
            "validate_parent": float(parent_val),
            "validate_candidates": float(cand_val),
            "second_look": float(second_upper),
        },
    )
