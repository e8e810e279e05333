"""OpenAI-compatible chat backend for the three proposer roles (and the chat client the VLM
verifier reuses).

Works with any server speaking the chat-completions protocol: OpenAI, vLLM's OpenAI server,
KServe's Hugging Face runtime (OpenAI endpoints), a local test server. Settings come from
config (``ChatSettings``: model, base URL, temperature, max tokens, timeout, attempts,
response format; inside an RPC each call's timeout is capped by the caller's remaining
deadline); the API key only from the environment (``api_key_env``, default
``EVOHARNESS_LLM_API_KEY``; or ``EVOHARNESS_OPENAI__API_KEY`` through the settings).

Every answer is untrusted: it is validated by ``evoharness.trace.answers`` and, when nothing
in it passes, the role is asked again (the rejection reasons are sent back) up to
``max_attempts`` calls in all; then the role reports ``FailedProposal`` entries with the last
reasons — nothing unvalidated is ever returned. Transport failures (HTTP 429, 5xx, timeouts,
connection errors) are retried within the same bound with exponential backoff (honouring a
``Retry-After`` header up to ``backoff_max_s``); 4xx other than 429 are not retried, except
that a 400 under a response format — or a 5xx whose body says the format or schema is
unsupported, as llama.cpp's server answers ``json_schema`` — downgrades ``json_schema`` →
``json_object_schema`` (llama.cpp's grammar extension) → ``json_object`` → no response format
(servers without structured-output support). Schemas: each request's schema is the role's
answer schema narrowed to the request (``role_schema``: the cluster ids asked about, the
responsibility asked for). For llama.cpp's grammar (``json_object_schema``) it is cut to the
subset its converter takes and keeps small (``grammar_schema``: no string/array length bounds,
no numeric bounds, any-value spelled out); what that leaves out — and every check beyond the
schema — is validated after decoding by ``evoharness.trace.answers``, whatever the format, so
no answer gets through that the validator would refuse.

Reproducibility: ``temperature`` and ``seed`` go with every request, and with ``cache_dir`` set
each answer is stored by a hash of its request (``AnswerCache``), so a re-run of the same round
sends nothing and makes the same decisions.

Metrics (``services.common.metrics``): ``evoharness_llm_calls{role,backend,outcome}`` with
outcome ``ok`` / ``invalid`` / ``cached_ok`` / ``cached_invalid`` / ``rate_limited`` / ``server_error`` / ``timeout`` /
``connection`` / ``bad_request``; ``evoharness_llm_tokens{role,kind}``;
``evoharness_llm_cost_usd{role}``; ``evoharness_proposal_failures{reason}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import openai
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from evoharness.canonical import canonical_json
from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness, Responsibility
from evoharness.search.feedback import ProposerInput
from evoharness.search.llm import ROLE as SEARCH_ROLE
from evoharness.tasks.models import Constraint
from evoharness.trace.answers import (
    ANSWER_SCHEMAS,
    FailedProposal,
    PatchProposal,
    parse_extractor_answer,
    parse_localizer_answer,
    parse_patch_answer,
)
from evoharness.trace.models import Attribution, FailureCluster
from evoharness.trace.roles import LlmUsage, RoleResult
from services.common.metrics import LLM_CALLS, LLM_COST, LLM_TOKENS, PROPOSAL_FAILURES
from services.common.server import remaining_seconds
from services.proposer.prices import PriceTable
from services.proposer.prompting import (
    PromptTooLarge,
    render_extractor,
    render_localizer,
    render_proposer,
    render_search,
)

T = TypeVar("T")


class ChatSettings(BaseModel):
    """One OpenAI-compatible chat endpoint.

    ``timeout_s``: per HTTP call. ``max_attempts``: calls per role request, transport retries
    and re-asks after an invalid answer together (>= 1). ``backoff_s``: first retry delay,
    doubled each retry, capped at ``backoff_max_s``. ``response_format``: ``json_schema``
    (structured outputs, the role's schema from ``evoharness.trace.answers.ANSWER_SCHEMAS``),
    ``json_object_schema`` (llama.cpp's server: ``{"type": "json_object", "schema": …}``,
    which it compiles to a decoding grammar; the schema sent is cut to what that grammar
    takes by ``grammar_schema``), ``json_object`` or ``none``. ``seed``: the
    sampling seed sent with every request (with ``temperature`` 0, reproducible answers where
    the server honours it). ``context_tokens``: the model's context window; a role prompt may
    use ``context_tokens - max_tokens`` (``prompt_budget``), the rest is room to answer.
    ``cache_dir``: when set, every answer is stored there under the sha256 of the request
    (model, messages, schema, temperature, seed, max tokens) and a repeated request is served
    from it, so a re-run makes the same decisions (``AnswerCache``).
    """

    model_config = ConfigDict(extra="forbid")

    model: str = "gpt-4o-mini"
    base_url: str = "https://api.openai.com/v1"
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    max_tokens: int = Field(default=2048, ge=1)
    timeout_s: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=3, ge=1, le=10)
    backoff_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=20.0, ge=0)
    response_format: Literal["json_schema", "json_object_schema", "json_object", "none"] = (
        "json_schema"
    )
    api_key_env: str = "EVOHARNESS_LLM_API_KEY"
    api_key: SecretStr = SecretStr("")
    extra_headers: dict[str, str] = Field(default_factory=dict)
    seed: int | None = None
    context_tokens: int = Field(default=8192, ge=256)
    cache_dir: str = ""

    @model_validator(mode="after")
    def _room_to_answer(self) -> ChatSettings:
        if self.prompt_budget < 128:
            raise ValueError(
                f"max_tokens {self.max_tokens} leaves {self.prompt_budget} of context_tokens "
                f"{self.context_tokens} for the prompt (need at least 128)"
            )
        return self

    @property
    def prompt_budget(self) -> int:
        """Tokens a rendered role prompt may use: ``context_tokens - max_tokens``."""
        return self.context_tokens - self.max_tokens


class ChatError(Exception):
    """A chat call that produced no answer. ``outcome`` is the metric label; ``retryable``
    says whether another attempt may succeed; ``retry_after`` is the server's hint (s)."""

    def __init__(
        self, outcome: str, message: str, retryable: bool, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.retryable = retryable
        self.retry_after = retry_after


@dataclass
class ChatReply:
    """One chat completion: ``content`` (may be empty), token counts as the server reported
    them (0 when it did not), ``finish_reason``; ``cached`` when it came from the
    ``AnswerCache`` (then it cost nothing this time)."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    cached: bool = False


class AnswerCache:
    """Chat answers stored as ``<folder>/<sha256>.json`` by a hash of the request.

    The key is the sha256 of the canonical JSON (``evoharness.canonical``) of the model id,
    the messages, the schema name and schema, temperature, seed and max tokens: the same
    request is answered the same way however often a run is repeated. Writes are atomic
    (temporary file, then rename), so concurrent role calls never read half an answer. An
    unreadable entry is treated as a miss and overwritten."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def key(
        settings: ChatSettings,
        messages: list[dict[str, Any]],
        schema_name: str,
        schema: dict[str, Any] | None,
    ) -> str:
        """The request's cache key (hex sha256)."""
        request = {
            "model": settings.model,
            "messages": messages,
            "schema_name": schema_name,
            "schema": schema,
            "temperature": settings.temperature,
            "seed": settings.seed,
            "max_tokens": settings.max_tokens,
        }
        return hashlib.sha256(canonical_json(request)).hexdigest()

    def get(self, key: str) -> ChatReply | None:
        """The stored answer for ``key`` (``cached=True``), or None."""
        path = self.folder / f"{key}.json"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return ChatReply(
                content=str(raw["content"]),
                prompt_tokens=int(raw["prompt_tokens"]),
                completion_tokens=int(raw["completion_tokens"]),
                finish_reason=raw.get("finish_reason"),
                cached=True,
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, reply: ChatReply) -> None:
        """Store ``reply`` under ``key``."""
        path = self.folder / f"{key}.json"
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(
            json.dumps(
                {
                    "content": reply.content,
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "finish_reason": reply.finish_reason,
                }
            ),
            encoding="utf-8",
        )
        tmp.replace(path)


#: Keywords left out of the schema sent as a decoding grammar (``grammar_schema``): llama.cpp's
#: converter does not enforce numeric bounds, and turns ``maxLength``/``maxItems`` into one
#: grammar rule per allowed repetition (a ``maxLength: 2000`` string alone made the localizer's
#: grammar 800 KB); documentation keys constrain nothing.
_GRAMMAR_DROP = frozenset(
    {
        "maxLength",
        "maxItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "pattern",
        "title",
        "description",
        "default",
    }
)
#: Any JSON value, spelled so that llama.cpp's converter accepts it (it refuses ``{}``).
_ANY_JSON: dict[str, Any] = {
    "anyOf": [{"type": t} for t in ("string", "number", "boolean", "null", "object", "array")]
}


def grammar_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` cut to the part of JSON Schema that llama.cpp's grammar converter
    (``llama_cpp.llama_grammar.json_schema_to_gbnf``) takes and keeps small: the keywords in
    ``_GRAMMAR_DROP`` removed, an unconstrained ``{}`` spelled as ``_ANY_JSON``. Everything
    left out is still enforced after decoding by ``evoharness.trace.answers``."""

    def walk(node: Any, names: bool = False) -> Any:
        if isinstance(node, dict):
            if names:  # "properties" / "$defs": keys are names, values are schemas
                return {k: walk(v) for k, v in node.items()}
            out = {
                k: walk(v, names=k in ("properties", "$defs"))
                for k, v in node.items()
                if k not in _GRAMMAR_DROP
            }
            return out or dict(_ANY_JSON)
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return dict(walk(schema))


def role_schema(role: str, **only: list[str]) -> dict[str, Any]:
    """The role's answer schema (``ANSWER_SCHEMAS``) narrowed to this request: ``cluster_ids``
    (localizer) or ``responsibilities`` (proposer) become enums, so a decoding grammar can only
    name a cluster that was asked about, or the responsibility that was asked for (the
    validator rejects anything else as ``unknown_cluster`` / ``wrong_responsibility``)."""
    schema = json.loads(json.dumps(ANSWER_SCHEMAS[role]))
    defs = schema.get("$defs", {})
    if "cluster_ids" in only:
        defs["AttributionItem"]["properties"]["cluster_id"] = {
            "type": "string",
            "enum": list(only["cluster_ids"]),
        }
    if "responsibilities" in only:
        defs["PatchItem"]["properties"]["responsibility"] = {
            "type": "string",
            "enum": list(only["responsibilities"]),
        }
    return dict(schema)


#: Words in a 5xx error body that say the server cannot honour the response format (llama.cpp's
#: server answers an unsupported ``json_schema`` request with HTTP 500).
_FORMAT_WORDS = ("response_format", "json_schema", "schema", "grammar")


def chat_error(exc: Exception, settings: ChatSettings) -> ChatError:
    """The ``ChatError`` for an exception of ``chat.completions.create``: ``timeout``,
    ``connection``, ``rate_limited`` (with the server's Retry-After), ``server_error`` (HTTP
    5xx, a malformed response, a 200 whose body is not JSON: retryable) or ``bad_request``
    (other HTTP 4xx: not retryable)."""
    if isinstance(exc, openai.APITimeoutError):
        return ChatError("timeout", f"timed out after {settings.timeout_s}s", True)
    if isinstance(exc, openai.APIConnectionError):
        return ChatError("connection", f"cannot reach {settings.base_url}: {exc}", True)
    if isinstance(exc, openai.RateLimitError):
        return ChatError("rate_limited", f"HTTP 429: {exc.message}", True, _retry_after(exc))
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500:
            return ChatError("server_error", f"HTTP {exc.status_code}: {exc.message}", True)
        return ChatError("bad_request", f"HTTP {exc.status_code}: {exc.message}", False)
    if isinstance(exc, openai.APIResponseValidationError):
        return ChatError("server_error", f"malformed response: {exc}", True)
    if isinstance(exc, openai.OpenAIError):
        return ChatError("connection", f"chat call failed: {exc}", True)
    # a 200 whose body is not JSON (the client's json.loads)
    return ChatError("server_error", f"response body is not JSON: {exc}", True)


def _format_unsupported(exc: openai.APIStatusError) -> bool:
    text = f"{exc.message} {getattr(exc, 'body', '')}".lower()
    return any(w in text for w in _FORMAT_WORDS)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


#: The next response format to try when a server refuses one.
_DOWNGRADE: dict[str, Literal["json_object_schema", "json_object", "none"]] = {
    "json_schema": "json_object_schema",
    "json_object_schema": "json_object",
    "json_object": "none",
}


class ChatClient:
    """Calls one OpenAI-compatible endpoint and records usage, cost and metrics.

    ``client`` may be injected (tests); by default an ``openai.OpenAI`` client is built with
    ``max_retries=0`` (retries are counted here, per attempt). Raises ``ValueError`` when no
    API key is configured.
    """

    def __init__(
        self,
        settings: ChatSettings,
        prices: PriceTable | None = None,
        backend: str = "openai",
        client: openai.OpenAI | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.prices = prices or PriceTable()
        self.backend = backend
        self._format = settings.response_format
        self._sleep = sleep
        self.cache = AnswerCache(Path(settings.cache_dir)) if settings.cache_dir else None
        if client is None:
            key = settings.api_key.get_secret_value() or os.environ.get(settings.api_key_env, "")
            if not key:
                raise ValueError(
                    f"no API key for the chat endpoint {settings.base_url}: set "
                    f"{settings.api_key_env} (or EVOHARNESS_OPENAI__API_KEY)"
                )
            client = openai.OpenAI(
                api_key=key,
                base_url=settings.base_url,
                timeout=settings.timeout_s,
                max_retries=0,
                default_headers=settings.extra_headers or None,
            )
        self.client = client

    # ---------------------------------------------------------------------- one call

    def complete(
        self, messages: list[dict[str, Any]], schema_name: str, schema: dict[str, Any] | None
    ) -> ChatReply:
        """One chat completion (from the ``AnswerCache`` when the same request was answered
        before). Raises ``ChatError`` on any transport or protocol failure; a 400 under a
        response format, or a 5xx whose body says the format or schema is unsupported
        (llama.cpp's server), downgrades the format (``json_schema`` →
        ``json_object_schema`` → ``json_object`` → ``none``) for this and later calls and
        raises a retryable ``ChatError``."""
        key = None
        if self.cache is not None:
            key = AnswerCache.key(self.settings, messages, schema_name, schema)
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        kwargs: dict[str, Any] = {
            "model": self.settings.model,
            "messages": messages,
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
        }
        if self.settings.seed is not None:
            kwargs["seed"] = self.settings.seed
        fmt = self._format
        if fmt == "json_schema" and schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema, "strict": False},
            }
        elif fmt == "json_object_schema" and schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": grammar_schema(schema)}
        elif fmt != "none":
            kwargs["response_format"] = {"type": "json_object"}
        left = remaining_seconds()  # inside an RPC: never outlive the caller's deadline
        if left is not None:
            if left <= 0:
                raise ChatError("timeout", "the caller's deadline has passed", False)
            kwargs["timeout"] = min(self.settings.timeout_s, left)
        try:
            resp = self.client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            unsupported = exc.status_code == 400 or (
                exc.status_code >= 500 and _format_unsupported(exc)
            )
            if unsupported and fmt != "none":
                self._format = _DOWNGRADE[fmt]
                raise ChatError(
                    "bad_request",
                    f"HTTP {exc.status_code} with response_format {fmt} ({exc.message[:200]}); "
                    f"retrying with {self._format}",
                    True,
                ) from exc
            raise chat_error(exc, self.settings) from exc
        except (openai.OpenAIError, ValueError) as exc:
            raise chat_error(exc, self.settings) from exc
        choices = getattr(resp, "choices", None) or []
        if not choices:
            raise ChatError("server_error", "response has no choices", True)
        msg = choices[0].message
        usage = getattr(resp, "usage", None)
        reply = ChatReply(
            content=(getattr(msg, "content", None) or ""),
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            finish_reason=getattr(choices[0], "finish_reason", None),
        )
        if self.cache is not None and key is not None:
            self.cache.put(key, reply)
        return reply

    # -------------------------------------------------------------- validated role call

    def ask(
        self,
        role: str,
        messages: list[dict[str, Any]],
        parse: Callable[[str], tuple[list[T], list[FailedProposal]]],
        schema_name: str,
        schema: dict[str, Any] | None,
    ) -> RoleResult[T]:
        """Ask until ``parse`` yields an item, or the answer is legitimately empty (no items,
        no failures), or ``max_attempts`` calls are spent. Returns the validated items, the
        failures of the last answer (or one ``backend_error`` failure when no answer came),
        and the usage of every attempt."""
        s = self.settings
        usage = LlmUsage(model=s.model)
        failures: list[FailedProposal] = []
        convo = list(messages)
        for attempt in range(s.max_attempts):
            try:
                reply = self.complete(convo, schema_name, schema)
            except ChatError as exc:
                usage.calls += 1
                LLM_CALLS.labels(role, self.backend, exc.outcome).inc()
                failures = [
                    FailedProposal(
                        role=role,
                        reason="backend_error",
                        detail=f"{exc.outcome}: {exc} (attempt {attempt + 1}/{s.max_attempts})",
                    )
                ]
                if not exc.retryable:
                    break
                if attempt + 1 < s.max_attempts and exc.outcome != "bad_request":
                    delay = min(s.backoff_max_s, s.backoff_s * 2**attempt)
                    if exc.retry_after is not None:
                        delay = min(s.backoff_max_s, max(delay, exc.retry_after))
                    self._sleep(delay)
                continue
            if not reply.cached:  # a cached answer cost nothing this time
                usage.calls += 1
                usage.prompt_tokens += reply.prompt_tokens
                usage.completion_tokens += reply.completion_tokens
                cost = self.prices.cost(s.model, reply.prompt_tokens, reply.completion_tokens)
                usage.cost_usd += cost
                LLM_TOKENS.labels(role, "prompt").inc(reply.prompt_tokens)
                LLM_TOKENS.labels(role, "completion").inc(reply.completion_tokens)
                LLM_COST.labels(role).inc(cost)
            items, failures = parse(reply.content)
            ok = bool(items) or not failures
            outcome = "ok" if ok else "invalid"
            LLM_CALLS.labels(
                role, self.backend, f"cached_{outcome}" if reply.cached else outcome
            ).inc()
            if ok:
                _count(failures)
                return RoleResult(items=items, failures=failures, usage=usage)
            convo = [
                *messages,
                {"role": "assistant", "content": reply.content[:4000]},
                {
                    "role": "user",
                    "content": "Your answer was rejected: "
                    + "; ".join(f"{f.reason}: {f.detail[:300]}" for f in failures[:8])
                    + ". Answer again with one JSON object that matches the schema.",
                },
            ]
        _count(failures)
        return RoleResult(items=[], failures=failures, usage=usage)


def _count(failures: Sequence[FailedProposal]) -> None:
    for f in failures:
        PROPOSAL_FAILURES.labels(f.reason).inc()


# ------------------------------------------------------------------------------- roles


def _too_large(role: str, exc: PromptTooLarge) -> RoleResult[Any]:
    f = FailedProposal(role=role, reason="too_large", detail=str(exc))
    _count([f])
    return RoleResult(failures=[f])


class OpenAIChatBackend:
    """``ProposerBackend`` over an OpenAI-compatible chat endpoint (see module docstring).

    Prompts come from the templates in ``services/proposer/prompts/`` rendered with
    summarised evidence (``services.proposer.prompting``) within the endpoint's
    ``prompt_budget``; a prompt that cannot fit is a ``too_large`` failure, never sent."""

    name = "openai"

    def __init__(self, chat: ChatClient) -> None:
        self.chat = chat

    def extract(self, prompt: str) -> RoleResult[Constraint]:
        """Constraints of ``prompt`` (validated by ``parse_extractor_answer``)."""
        try:
            rendered = render_extractor(prompt, self.chat.settings.prompt_budget)
        except PromptTooLarge as exc:
            return _too_large("extractor", exc)

        def parse(content: str) -> tuple[list[Constraint], list[FailedProposal]]:
            res = parse_extractor_answer(content, prompt)
            return [r for r in res if isinstance(r, Constraint)], [
                r for r in res if isinstance(r, FailedProposal)
            ]

        return self.chat.ask(
            "extractor", rendered.messages, parse, "extractor_answer", ANSWER_SCHEMAS["extractor"]
        )

    def localize(
        self,
        clusters: Sequence[FailureCluster],
        harness: Harness,
        context: dict[str, Any] | None = None,
    ) -> RoleResult[Attribution]:
        """Attributions for ``clusters`` (validated by ``parse_localizer_answer``)."""
        if not clusters:
            return RoleResult()
        ids = [c.cluster_id for c in clusters]
        try:
            rendered = render_localizer(
                list(clusters), harness, self.chat.settings.prompt_budget, context
            )
        except PromptTooLarge as exc:
            return _too_large("localizer", exc)

        def parse(content: str) -> tuple[list[Attribution], list[FailedProposal]]:
            res = parse_localizer_answer(content, ids)
            return [r for r in res if isinstance(r, Attribution)], [
                r for r in res if isinstance(r, FailedProposal)
            ]

        return self.chat.ask(
            "localizer",
            rendered.messages,
            parse,
            "localizer_answer",
            role_schema("localizer", cluster_ids=ids),
        )

    def propose(
        self,
        cluster: FailureCluster,
        attribution: Attribution,
        harness: Harness,
        n: int,
        responsibility: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> RoleResult[Patch]:
        """Up to ``n`` patches for ``responsibility`` (default: the attribution's choice),
        validated by ``parse_patch_answer``; ``no_patch`` chosen and no responsibility → none."""
        resp = responsibility or attribution.chosen
        if resp == "no_patch" or n <= 0:
            return RoleResult()
        try:
            rendered = render_proposer(
                cluster, attribution, harness, resp, n, self.chat.settings.prompt_budget, context
            )
        except PromptTooLarge as exc:
            return _too_large("proposer", exc)

        def parse(content: str) -> tuple[list[Patch], list[FailedProposal]]:
            res = parse_patch_answer(content, harness, resp)
            ok = [r.patch for r in res if isinstance(r, PatchProposal)]
            return ok[:n], [r for r in res if isinstance(r, FailedProposal)]

        return self.chat.ask(
            "proposer",
            rendered.messages,
            parse,
            "proposer_answer",
            role_schema("proposer", responsibilities=[resp]),
        )

    def propose_search(self, view: ProposerInput, n: int) -> RoleResult[Patch]:
        """The search proposer (``evoharness.search.llm``): up to ``n`` whole-harness patches
        of ``view.parent``, each for one responsibility (any), from the feedback in ``view``
        (``render_search``), validated by ``parse_patch_answer``; the answer schema sent
        names the five responsibilities. ``n`` <= 0 → nothing asked."""
        if n <= 0:
            return RoleResult()
        try:
            rendered = render_search(view, n, self.chat.settings.prompt_budget)
        except PromptTooLarge as exc:
            return _too_large(SEARCH_ROLE, exc)
        harness = view.parent

        def parse(content: str) -> tuple[list[Patch], list[FailedProposal]]:
            res = parse_patch_answer(content, harness, None)
            ok = [r.patch for r in res if isinstance(r, PatchProposal)]
            bad = [
                r.model_copy(update={"role": SEARCH_ROLE})
                for r in res
                if isinstance(r, FailedProposal)
            ]
            return ok[:n], bad

        return self.chat.ask(
            SEARCH_ROLE,
            rendered.messages,
            parse,
            "proposer_answer",
            role_schema("proposer", responsibilities=[r.value for r in Responsibility]),
        )


__all__ = [
    "AnswerCache",
    "grammar_schema",
    "role_schema",
    "ChatClient",
    "ChatError",
    "ChatReply",
    "ChatSettings",
    "OpenAIChatBackend",
    "chat_error",
]
