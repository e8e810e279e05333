"""The evolution worker's backends, built from config: generator, verifier, proposer, artifact
store (``evoharness.local_store.LocalArtifactStore`` or S3), the content-addressed execution
and evidence caches in front of them, and ``TracePorts`` (the round's ports over all of them).

Backends (``EvolutionParams.backends``):

- generator ``sim``: ``evoharness.sim.SimGenerator`` in-process (the embedded CPU world, a
  behavioural simulator, not a diffusion model); ``grpc``: ``services.generation.client.
  GenerationClient`` at ``worker.generation_address``;
- verifier ``sim-detector`` (the default): ``evoharness.sim.SimDetector``, the inspector with a
  real detector + VLM's error model (evolution's internal verifier); ``sim``:
  ``evoharness.sim.SimInspector`` (exact, pixels only: official scoring); ``grpc``:
  ``services.verification.client`` at ``worker.verification_address``;
- proposer ``rule``: ``evoharness.trace.rule_proposer``; ``grpc``: the proposer service (also
  the LLM search proposer of the ``autoref`` protocol, ``workflows.search_activities``).

**Idempotency.** Every generator call goes through ``CachingGenerator`` and the one execution
cache (``evoharness.execution_cache``: one record per execution, keyed by
``execution_key(program, generator_id, seed)``, docs/architecture.md). For the in-process
generator the worker keeps it in its store; for the ``grpc`` generator the generation service
owns it (it computes the key, stores the image and the record, and answers ``cached`` with the
execution's recorded cost), and the worker keeps no record of its own. Either way the image and
its record are stored *before* the call is counted, so a worker killed mid-activity repeats no
completed call when the activity is retried. Evidence of (verifier id, image, task
constraints) is cached under ``evidence/``, so evidence of one verifier is never served for
another.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evoharness.canonical import canonical_json, content_hash, sha256_hex
from evoharness.capabilities import FULL, GeneratorCapabilities
from evoharness.evidence import Evidence
from evoharness.execution_cache import ExecutionCache
from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.local_store import LocalArtifactStore
from evoharness.ports import ArtifactStore, GeneratedImage, Generator, Verifier, store_fetch
from evoharness.program import ImageRef, Program, execution_key
from evoharness.tasks.models import Task
from evoharness.trace.models import Attribution, Execution, FailureCluster
from evoharness.trace.round import RoundPorts
from services.common.channel import RpcFailure
from services.common.errors import FailedPrecondition, InvalidField, NotFound, ResourceExhausted
from services.common.metrics import CACHE_HITS, CACHE_MISSES
from services.common.settings import ServiceSettings, load_settings
from services.runtime.search import SearchSection, build_providers


class WorkerSection(BaseModel):
    """Worker settings. ``store``: ``s3`` (the ``s3`` section) or ``local`` (files under
    ``local_dir``; single machine only). ``call_log``: when set, one line per generator call
    actually made (``<execution key>\\t<unix time>``), appended after the image is stored
    (tests and benchmarks count these). ``activity_threads``: executor threads.
    ``sim_profile``: the embedded world's generator profile for the in-process ``sim``
    generator (``evoharness.sim.profiles``; a deployment choice, never a harness's).
    ``registry_address``: the registry service, for a registry-backed ``ResultRegistrar``
    (``workflows.activities``); None keeps the default S3 registrar.
    ``proposer_timeout_s``: deadline of one call to the proposer service (localize or
    propose); a proposer that does not answer in time is recorded as the round's proposal
    failure (``localizer_error`` / ``proposer_error``) and the round goes on without it, so a
    hung proposer costs at most this per call, never the activity's retries. Keep
    ``activity_timeout_s`` of a run above (1 + max_clusters) × this. ``tracking_uri``: the
    experiment tracker of runs with ``tracking`` set and no ``tracking_uri`` of their own
    (None: $MLFLOW_TRACKING_URI; ``services.tracking``). ``search``: the agent's search
    providers of the harnesses evolved here — the runtime service's own section
    (``services.runtime.search.SearchSection``, the same defaults: the embedded knowledge base
    ranked with the packaged MiniLM where it loads, else TF-IDF), built by the same
    ``build_providers``, so a harness is evolved against the search it is served with; keep
    it equal to the serving runtime's ``runtime.search`` (docs/agent-tools.md).
    ``library_index``: the reference library of the agent's ``image_search`` in the harnesses
    evolved here, as the runtime's ``runtime.library_index`` says it ("" = none; ``embedded``
    builds the embedded library into the worker's store on first use; else an index key
    there); keep it equal to the serving runtime's."""

    model_config = ConfigDict(extra="forbid")

    task_queue: str = "evoharness"
    temporal_address: str = "127.0.0.1:7233"
    namespace: str = "default"
    store: str = Field(default="s3", pattern="^(s3|local)$")
    local_dir: str = ".evoharness/store"
    generation_address: str = "127.0.0.1:50051"
    verification_address: str = "127.0.0.1:50052"
    proposer_address: str = "127.0.0.1:50053"
    registry_address: str | None = None
    call_log: str | None = None
    activity_threads: int = Field(default=8, ge=1)
    max_concurrent_activities: int = Field(default=8, ge=1)
    prices_path: str | None = None
    sim_profile: str = "sdxl-like"
    proposer_timeout_s: float = Field(default=120.0, gt=0)
    tracking_uri: str | None = None
    search: SearchSection = Field(default_factory=SearchSection)
    library_index: str = ""


class WorkerSettings(ServiceSettings):
    """``server`` + ``s3`` (shared) and ``worker`` sections; YAML via ``--config`` or
    ``EVOHARNESS_CONFIG``, env ``EVOHARNESS_WORKER__STORE=local`` etc."""

    worker: WorkerSection = Field(default_factory=WorkerSection)


def load_worker_settings(config: str | Path | None = None, **overrides: Any) -> WorkerSettings:
    """Load ``WorkerSettings`` (see ``services.common.settings.load_settings``)."""
    return load_settings(WorkerSettings, config, **overrides)


# ------------------------------------------------------------------------------ stores


def build_store(settings: WorkerSettings) -> ArtifactStore:
    """The configured artifact store (S3 bucket created on first use)."""
    if settings.worker.store == "local":
        return LocalArtifactStore(settings.worker.local_dir)
    from services.storage.s3 import S3ArtifactStore

    # every activity thread may fan out to 8 threads (executions, gate) that use the store
    pool = max(32, 8 * settings.worker.activity_threads)
    store = S3ArtifactStore.from_settings(settings.s3, pool_size=pool)
    store.ensure_bucket()
    return store


# --------------------------------------------------------------------- execution cache


@dataclass
class CacheCounters:
    """Thread-safe counters of one ``CachingGenerator``: executions served from the cache
    (``hits``), generator calls made (``misses``) and their generator-seconds."""

    hits: int = 0
    misses: int = 0
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


class CachingGenerator:
    """The worker's generator: every execution goes through the one execution cache
    (``evoharness.execution_cache``), whoever owns it.

    ``inner``: the real generator; ``store``: the worker's artifact store; ``call_log``:
    optional file (see ``WorkerSection.call_log``).

    - An in-process generator (``sim``) has no cache of its own: this class keeps it, in
      ``store``, computing the execution key once per execution and holding its
      single-flight lock; it counts ``CACHE_HITS``/``CACHE_MISSES``.
    - A generator that owns the cache (``inner.caches_executions`` is true: the generation
      service's client) is asked directly: the service computes the key, keeps the record and
      counts hits and misses in its own metrics; this class writes no record and counts no
      metric (the dashboard sums both processes), only ``counters`` and the call log, from the
      answer's ``cached`` flag.

    ``generate`` returns ``GeneratedImage`` with ``cached=True`` and ``seconds=0`` on a hit,
    and carries the execution key and ``nominal_seconds``, what the image cost when it was
    generated (the recorded figure on a hit), so nothing downstream recomputes the key or
    re-reads the record."""

    def __init__(self, inner: Generator, store: ArtifactStore, call_log: str | None = None):
        self.inner = inner
        self.store = store
        self.call_log = call_log
        self.counters = CacheCounters()
        self.cache = None if getattr(inner, "caches_executions", False) else ExecutionCache(store)
        self._log_lock = threading.Lock()

    @property
    def generator_id(self) -> str:
        """The frozen generator's identity."""
        return self.inner.generator_id

    @property
    def capabilities(self) -> GeneratorCapabilities | None:
        """The inner generator's capabilities (None when it declares none): the runtime
        drops what the generator cannot honour before the call."""
        return getattr(self.inner, "capabilities", None)

    def generate(self, program: Program) -> GeneratedImage:
        """Serve from the execution cache or generate, record, count (see the class
        docstring); one call at a time per execution key in this process."""
        if self.cache is None:
            img = self.inner.generate(program)
            if img.cached:
                with self.counters.lock:
                    self.counters.hits += 1
            else:
                self._count_call(img.execution_key, img.seconds)
            return img
        key = execution_key(program, self.generator_id, program.seed)
        with self.cache.single_flight(key):
            return self._generate(self.cache, program, key)

    def _count_call(self, key: str, seconds: float) -> None:
        """Count one generator call actually made and append it to the call log."""
        with self.counters.lock:
            self.counters.misses += 1
            self.counters.seconds += seconds
        if self.call_log:
            with self._log_lock, open(self.call_log, "a", encoding="utf-8") as f:
                f.write(f"{key}\t{time.time():.3f}\n")
                f.flush()
                os.fsync(f.fileno())

    def _generate(self, cache: ExecutionCache, program: Program, key: str) -> GeneratedImage:
        bucket = getattr(self.store, "bucket", "")
        rec = cache.lookup(key)
        if rec is not None:
            png = self.store.get(rec.key)
            with self.counters.lock:
                self.counters.hits += 1
            CACHE_HITS.inc()
            return GeneratedImage(
                png=png,
                generator_id=rec.generator_id,
                seconds=0.0,
                manifest=rec.manifest,
                width=rec.width,
                height=rec.height,
                ref=ImageRef(bucket=bucket, key=rec.key, sha256=rec.sha256),
                cached=True,
                execution_key=key,
                nominal_seconds=rec.seconds,
            )
        t0 = time.perf_counter()
        img = self.inner.generate(program)
        seconds = img.seconds or (time.perf_counter() - t0)
        # the image and its record are stored before the call is counted
        rec = cache.record(
            key,
            img.png,
            generator_id=img.generator_id,
            seconds=seconds,
            width=img.width,
            height=img.height,
            manifest=img.manifest,
            program=program.model_dump(mode="json", exclude_none=True),
        )
        CACHE_MISSES.inc()
        self._count_call(key, seconds)
        return GeneratedImage(
            png=img.png,
            generator_id=img.generator_id,
            seconds=seconds,
            manifest=img.manifest,
            width=img.width,
            height=img.height,
            ref=ImageRef(bucket=bucket, key=rec.key, sha256=rec.sha256),
            cached=False,
            execution_key=key,
            nominal_seconds=seconds,
        )


class CachingVerifier:
    """Caches a verifier's evidence per (verifier id, image sha256, constraints) under
    ``evidence/``. The verifier id is ``inner.verifier_id`` (e.g. ``sim-detector@<digest>``,
    or what a verification service reports), else its class name."""

    def __init__(self, inner: Verifier, store: ArtifactStore) -> None:
        self.inner = inner
        self.store = store

    @property
    def verifier_id(self) -> str:
        """The wrapped verifier's identity (part of every cache key)."""
        return str(getattr(self.inner, "verifier_id", "") or type(self.inner).__name__)

    def verify(self, png: Any, constraints: Sequence[Any], prompt: str = "") -> list[Evidence]:
        """``inner.verify`` unless the same image was already checked on these constraints.
        ``png``: PNG bytes or a ``GeneratedImage``."""
        if isinstance(png, GeneratedImage):
            png = png.png
        cs = [c.model_dump(mode="json") for c in constraints]
        key = "evidence/" + content_hash([self.verifier_id, sha256_hex(png), cs]) + ".json"
        if self.store.exists(key):
            return [Evidence.model_validate(e) for e in json.loads(self.store.get(key))]
        ev = list(self.inner.verify(png, constraints, prompt))
        self.store.put(
            key, canonical_json([e.model_dump(mode="json") for e in ev]), "application/json"
        )
        return ev


# ----------------------------------------------------------------------------- backends


def _client_options(settings: WorkerSettings) -> dict[str, Any]:
    """``token`` and ``tls_ca_file`` of the worker's outgoing channels: the deployment's
    bearer token (``server.auth_token``, from ``EVOHARNESS_SERVER__AUTH_TOKEN``) and the CA of
    the services' certificates (``client.tls_ca_file``)."""
    return settings.client.channel_options(settings.server.auth_token)


def build_generator(
    name: str, settings: WorkerSettings, store: ArtifactStore | None = None
) -> Generator:
    """The generator named ``name`` (``sim`` or ``grpc``); ``ValueError`` for another name.
    ``store``: where the in-process ``sim`` generator reads references that name a bucket
    (``store_fetch``); references without one are read as file paths."""
    if name == "sim":
        from evoharness.sim import SimGenerator
        from evoharness.sim.profiles import load_profile

        fetch = store_fetch(store) if store is not None else None
        return SimGenerator(load_profile(settings.worker.sim_profile), fetch=fetch)
    if name == "grpc":
        from services.generation.client import GenerationClient

        return GenerationClient(settings.worker.generation_address, **_client_options(settings))
    raise ValueError(f"unknown generator backend {name!r} (sim | grpc)")


def build_verifier(name: str, settings: WorkerSettings) -> Verifier:
    """The verifier named ``name`` (``sim-detector``, ``sim`` or ``grpc``); ``ValueError`` for
    another name."""
    if name == "sim-detector":
        from evoharness.sim import SimDetector

        return SimDetector()  # type: ignore[return-value]  # verify(image|png, ...) superset
    if name == "sim":
        from evoharness.sim import SimInspector

        return SimInspector()  # type: ignore[return-value]  # verify(image|png, ...) superset
    if name == "grpc":
        from services.verification.client import VerificationClient

        return VerificationClient(settings.worker.verification_address, **_client_options(settings))
    raise ValueError(f"unknown verifier backend {name!r} (sim-detector | sim | grpc)")


@dataclass
class Proposer:
    """Localizer + patch proposer pair; ``search``: the search proposer's role
    (``evoharness.search.llm.AskFn``) when the backend has one (``grpc``), else None."""

    localize: Any
    propose: Any
    search: Any = None


def build_proposer(name: str, settings: WorkerSettings) -> Proposer:
    """The proposer named ``name`` (``rule`` or ``grpc``); ``ValueError`` for another name."""
    if name == "rule":
        from evoharness.trace import rule_proposer

        return Proposer(rule_proposer.localize, rule_proposer.propose)
    if name == "grpc":
        from services.proposer.client import ProposerClient

        client = ProposerClient(
            settings.worker.proposer_address,
            timeout=settings.worker.proposer_timeout_s,
            **_client_options(settings),
        )
        # RoleResult answers: usage and the service's rejected answers reach the ledger
        return Proposer(client.localize, client.propose, client.propose_search)
    raise ValueError(f"unknown proposer backend {name!r} (rule | grpc)")


class TracePorts:
    """Everything one worker process needs for rounds with one backend combination.

    ``round_ports()`` gives the ``RoundPorts`` used by both the activities and the in-process
    round (``evoharness.trace.round_driver.run_round``). ``proposer_impl`` replaces the named
    proposer (tests inject adversarial proposers this way)."""

    def __init__(
        self,
        settings: WorkerSettings,
        generator: str = "sim",
        verifier: str = "sim-detector",
        proposer: str = "rule",
        store: ArtifactStore | None = None,
        proposer_impl: Proposer | None = None,
    ) -> None:
        self.settings = settings
        self.store = store if store is not None else build_store(settings)
        self.generator = CachingGenerator(
            build_generator(generator, settings, self.store), self.store, settings.worker.call_log
        )
        self.verifier = CachingVerifier(build_verifier(verifier, settings), self.store)
        self.proposer = proposer_impl or build_proposer(proposer, settings)
        #: The agent's search providers (``worker.search``), built as the runtime service
        #: builds its own; the embedded base is built on the first search (issue 32).
        self.search_providers = build_providers(settings.worker.search)
        self._library: Any = None

    def reference_library(self) -> Any:
        """The agent's reference library (``worker.library_index``; None when unset), opened
        on first use (``evoharness.sim.reference_library.open_library``)."""
        if self._library is None and self.settings.worker.library_index:
            from evoharness.sim.reference_library import open_library

            self._library = open_library(self.store, self.settings.worker.library_index)
        return self._library

    def _tools(self) -> Any:
        """The tools' backends an evolved harness runs with: the search providers and the
        reference library."""
        from evoharness.runtime.tool_backends import ToolBackends

        return ToolBackends(
            search_providers=self.search_providers, reference_library=self.reference_library()
        )

    def runtime(self, harness: Harness) -> Any:
        """A ``HarnessRuntime`` for ``harness`` over the cached generator and verifier and
        the worker's search providers."""
        from evoharness.runtime import HarnessRuntime

        return HarnessRuntime(harness, self.generator, self.verifier, tools=self._tools())

    def compile_program(self, harness: Harness, task: Task, seed: int) -> Any:
        """Compile without generating (reads only the prompt and references): the runtime's
        ``Compiled`` (program and trace), which the proposal checks compare as a plan. The
        program is what the harness asks for, before any capability drop: the checks compare
        parent and child with the deployed capabilities themselves
        (``unsupported_by_generator``)."""
        from evoharness.runtime import HarnessRuntime

        rt = HarnessRuntime(
            harness, self.generator, self.verifier, tools=self._tools(), capabilities=FULL
        )
        return rt.compile_task(task, seed)

    def execute(self, harness: Harness, task: Task, seed: int) -> Execution:
        """Steps 1–2 for one (task, seed): run the harness on the task's request, then inspect
        the selected image against the task's constraints."""
        rt = self.runtime(harness)
        res = rt.run_task(task, seed)
        image: GeneratedImage = res.image
        evidence = self.verifier.verify(image.png, task.constraints, task.prompt)
        made = [im for im in res.images if not im.cached]
        return Execution(
            task_id=task.task_id,
            seed=seed,
            harness_id=harness_id(harness),
            # computed once, by the cache in front of the generator, and carried here
            execution_key=image.execution_key,
            program=res.program,
            programs=list(res.programs),
            image=image.ref,
            evidence=evidence,
            trace=[_jsonable(t) for t in res.trace],
            generator_seconds=sum(im.seconds for im in made),
            generator_calls=len(made),
            cached=not made,
            nominal_generator_seconds=sum(im.nominal_seconds for im in res.images),
        )

    def localize(self, clusters: list[FailureCluster], harness: Harness) -> list[Attribution]:
        """The proposer's localizer (usage and dropped answers go to the active
        ``ProposerLedger``).

        A failed call to the proposer service (``PROPOSER_SERVICE_ERRORS``: unreachable,
        deadline exceeded, refused) is recorded in the active ledger as ``localizer_error``
        with what failed (the exception's type and message, the clusters and the harness) and
        gives no attributions, so the round attributes from evidence alone. Any other
        exception (a defect, not an unavailable service) and any failure outside an activity
        (no ledger) is raised."""
        try:
            res = self.proposer.localize(clusters, harness)
        except PROPOSER_SERVICE_ERRORS as exc:
            ledger = LEDGER.get()
            if ledger is None:
                raise
            ids = ", ".join(c.cluster_id for c in clusters)
            ledger.failures.append(
                (
                    "",
                    "localizer_error",
                    f"{type(exc).__name__}: {exc} (localizing clusters [{ids}] of harness "
                    f"{harness_id(harness)})",
                    "",
                )
            )
            return []
        _record(res, "localizer", "")
        return list(res)

    def propose(
        self, cluster: FailureCluster, attr: Attribution, harness: Harness, n: int
    ) -> list[Any]:
        """The proposer's raw (untrusted) patches (usage and dropped answers go to the active
        ``ProposerLedger``)."""
        res = self.proposer.propose(cluster, attr, harness, n)
        _record(res, "proposer", cluster.cluster_id)
        return list(res)

    def round_ports(self) -> RoundPorts:
        """``RoundPorts`` over this object's methods."""
        return RoundPorts(
            execute=self.execute,
            compile_program=self.compile_program,
            localize=self.localize,
            propose=self.propose,
            capabilities=self.generator.capabilities,
        )


#: What a call to the proposer service raises when the service fails
#: (``services.common.channel.error_from_rpc``): OS errors (unreachable, deadline exceeded,
#: permission denied) and the mapped gRPC statuses.
PROPOSER_SERVICE_ERRORS: tuple[type[Exception], ...] = (
    OSError,
    InvalidField,
    NotFound,
    FailedPrecondition,
    ResourceExhausted,
    RpcFailure,
)


@dataclass
class ProposerLedger:
    """What the proposer cost and dropped during one activity: LLM ``calls``, tokens and
    ``cost_usd`` (from a ``RoleResult``'s ``usage``; zero for the rule proposer) and the
    answers the proposer's own validator rejected, as ``(cluster_id, reason, detail,
    excerpt)`` (``excerpt``: up to 200 characters of the rejected answer, "" when none)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: the language model that answered (empty for the rule proposer)
    model: str = ""


LEDGER: ContextVar[ProposerLedger | None] = ContextVar("proposer_ledger", default=None)


def _record(result: Any, role: str, cluster_id: str) -> None:
    ledger = LEDGER.get()
    if ledger is None:
        return
    usage = getattr(result, "usage", None)
    if usage is not None:
        ledger.calls += int(getattr(usage, "calls", 0))
        ledger.prompt_tokens += int(getattr(usage, "prompt_tokens", 0))
        ledger.completion_tokens += int(getattr(usage, "completion_tokens", 0))
        ledger.cost_usd += float(getattr(usage, "cost_usd", 0.0))
        ledger.model = ledger.model or str(getattr(usage, "model", "") or "")
    for f in getattr(result, "failures", []) or []:
        ledger.failures.append(
            (cluster_id, f"{role}_{f.reason}", f.detail, str(getattr(f, "excerpt", "") or ""))
        )


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
