"""Every Prometheus metric evoharness exports, in one place.

Dashboards and alert rules in ``charts/evoharness`` query only names defined here (a test
extracts metric names from the PromQL and checks they are registered). Import the metric you
need from this module; do not define metrics elsewhere.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

# --- every gRPC server (interceptor) -----------------------------------------------------
GRPC_REQUESTS = Counter(
    "evoharness_grpc_requests", "gRPC requests handled", ["service", "method", "code"]
)
GRPC_LATENCY = Histogram(
    "evoharness_grpc_latency_seconds",
    "gRPC handler latency",
    ["service", "method"],
    buckets=LATENCY_BUCKETS,
)

# --- generation ---------------------------------------------------------------------------
GENERATION_REQUESTS = Counter(
    "evoharness_generation_requests", "Generation requests", ["backend", "code"]
)
GENERATION_LATENCY = Histogram(
    "evoharness_generation_latency_seconds",
    "Generation request latency",
    ["backend"],
    buckets=LATENCY_BUCKETS,
)
GENERATION_ERRORS = Counter(
    "evoharness_generation_errors", "Generation errors by status code", ["backend", "code"]
)
IMAGES_GENERATED = Counter("evoharness_images_generated", "Images generated", ["backend"])
GENERATOR_SECONDS = Counter("evoharness_generator_seconds", "Generator-seconds spent", ["backend"])

# --- verification -------------------------------------------------------------------------
VERIFIER_LATENCY = Histogram(
    "evoharness_verifier_latency_seconds",
    "Verifier latency per image",
    ["backend"],
    buckets=LATENCY_BUCKETS,
)
VERDICTS = Counter("evoharness_verdicts", "Verdicts by status", ["backend", "status"])
#: The ``Judge`` RPC (the KScore-style rubric, ``services.verification.judge``), per judge
#: backend (``inspector`` | ``kscore``).
JUDGE_LATENCY = Histogram(
    "evoharness_judge_latency_seconds",
    "Judge (KScore rubric) latency per image",
    ["backend"],
    buckets=LATENCY_BUCKETS,
)
#: ``outcome``: ``scored`` (a valid rubric with a score), ``unscored`` (valid, nothing
#: measured), ``failed`` (no valid answer).
JUDGEMENTS = Counter("evoharness_judgements", "Judge calls by outcome", ["backend", "outcome"])
#: ``level``: ``0`` | ``0.5`` | ``1`` | ``not_measured``, per rubric dimension.
JUDGE_LEVELS = Counter(
    "evoharness_judge_levels",
    "Rubric levels given, by dimension",
    ["backend", "dimension", "level"],
)

# --- proposer / LLM -----------------------------------------------------------------------
LLM_CALLS = Counter("evoharness_llm_calls", "LLM calls", ["role", "backend", "outcome"])
LLM_TOKENS = Counter("evoharness_llm_tokens", "LLM tokens", ["role", "kind"])
LLM_COST = Counter("evoharness_llm_cost_usd", "Estimated LLM cost in USD", ["role"])
PROPOSAL_FAILURES = Counter(
    "evoharness_proposal_failures", "Proposals dropped, by reason", ["reason"]
)

# --- evolution (worker) -------------------------------------------------------------------
ROUNDS = Counter("evoharness_rounds", "TRACE rounds completed", ["run_id"])
EVOLUTION_ROUND = Gauge("evoharness_evolution_round", "Current round of a run", ["run_id"])
EVOLUTION_PROGRESS = Gauge(
    "evoharness_evolution_progress_ratio", "Done/total of the current phase", ["run_id", "phase"]
)
DECISIONS = Counter("evoharness_decisions", "Round and candidate decisions", ["kind", "reason"])
PASS_RATE = Gauge("evoharness_pass_rate", "Mean pass rate", ["run_id", "split"])
REGRESSION = Gauge("evoharness_regression", "Preservation regression of the last gate", ["run_id"])
SPEND_USD = Counter("evoharness_spend_usd", "Evolution spend in USD", ["run_id", "kind"])
BUDGET_USD = Gauge("evoharness_budget_usd", "Evolution budget cap in USD", ["run_id"])
#: Label-free runs: prompts of the run's splits from which the frozen extractor read nothing
#: checkable (left out of evolution; issue 19). Also in the run report.
RUN_NOTHING_CHECKABLE = Gauge(
    "evoharness_run_nothing_checkable_prompts",
    "Prompts of a label-free run from which the extractor read nothing checkable",
    ["run_id"],
)
CACHE_HITS = Counter("evoharness_cache_hits", "Executions served from the content-addressed store")
CACHE_MISSES = Counter("evoharness_cache_misses", "Executions that had to be generated")
WORKFLOW_LAST_PROGRESS = Gauge(
    "evoharness_workflow_last_progress_timestamp_seconds",
    "Unix time of a run's last progress",
    ["run_id"],
)

# --- registry and runtime ------------------------------------------------------------------
PROMOTIONS = Counter("evoharness_promotions", "Channel promotions", ["channel", "outcome"])
POSTPROMOTION_REGRESSION = Gauge(
    "evoharness_postpromotion_regression",
    "Preservation regression measured after a promotion",
    ["channel"],
)
POSTPROMOTION_EPSILON = Gauge(
    "evoharness_postpromotion_epsilon", "Gate epsilon for the promoted harness", ["channel"]
)
RENDER_REQUESTS = Counter(
    "evoharness_render_requests", "Runtime.Render requests", ["channel", "registration", "code"]
)
#: Renders of a registration on a generator honouring less than the one it was validated on
#: (``capability``: a name from ``GeneratorCapabilities.shortfall``), one count per lacking
#: capability and request.
CAPABILITY_MISMATCH = Counter(
    "evoharness_runtime_capability_mismatch",
    "Renders served by a generator with fewer capabilities than the registration was validated on",
    ["registration", "capability"],
)
#: Renders whose verifier decided none of the constraints read from the prompt (nothing
#: checkable was extracted, or the verifier could see none of it): their "success" means
#: nothing, so they are counted, never reported as passes (issue 19).
RENDER_NOTHING_CHECKED = Counter(
    "evoharness_render_nothing_checked",
    "Verified renders on which the verifier could decide no constraint read from the prompt",
    ["channel", "registration"],
)
#: Constraints the verifier answered ``uncertain`` on a render (e.g. an object outside what it
#: can see), by constraint type.
RENDER_UNCERTAIN_CONSTRAINTS = Counter(
    "evoharness_render_uncertain_constraints",
    "Constraints read from a prompt that the verifier could not decide",
    ["channel", "type"],
)
RENDER_LATENCY = Histogram(
    "evoharness_render_latency_seconds",
    "Runtime.Render latency",
    ["channel"],
    buckets=LATENCY_BUCKETS,
)
#: Sampled Render records queued for the artifact store (issue 34, ``runtime.traffic``).
TRAFFIC_SAMPLED = Counter(
    "evoharness_traffic_sampled", "Render requests sampled into the traffic store", ["channel"]
)
#: Sampled records written to the artifact store (sampled - stored - dropped = still buffered).
TRAFFIC_STORED = Counter(
    "evoharness_traffic_stored", "Sampled Render records written to the traffic store", ["channel"]
)
#: Sampled records not stored: ``too_long`` / ``redacted`` (prompt filter), ``queue_full``
#: (the writer is behind: dropped, never waited for), ``store_error``.
TRAFFIC_DROPPED = Counter(
    "evoharness_traffic_dropped", "Sampled Render records not stored", ["channel", "reason"]
)
#: Jensen–Shannon distance (base 2, 0..1) between the channel's recent sampled traffic and the
#: tasks its serving harness was evolved on, per distribution (``kinds``, ``classes``).
TRAFFIC_DRIFT = Gauge(
    "evoharness_traffic_drift",
    "Jensen-Shannon distance of recent traffic from the tasks the serving harness was evolved on",
    ["channel", "distribution"],
)
#: Share of failed verdicts per constraint type over the channel's recent sampled traffic.
TRAFFIC_FAILURE_RATE = Gauge(
    "evoharness_traffic_failure_rate",
    "Failed share of decided verdicts in recent sampled traffic, by constraint type",
    ["channel", "feature"],
)
TRAFFIC_WINDOW = Gauge(
    "evoharness_traffic_window_records",
    "Sampled records in the drift window",
    ["channel"],
)
