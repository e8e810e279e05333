"""Render ``charts/evoharness`` offline with helm-python-sdk (Helm v4's Go SDK through
ctypes, no helm binary) and split the manifests into documents.

``VALUES_FILES`` maps a name to the values file of one supported setup ("default" = the
chart's own values.yaml). ``render(name)`` is cached: each setup renders once per session.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "evoharness"
#: Kubernetes version every manifest is validated against (kubernetes-validate ships its
#: schemas offline; the chart's kubeVersion is >=1.29).
K8S_VERSION = "1.31.0"
RELEASE, NAMESPACE = "evo", "evoharness"
VALUES_FILES: dict[str, Path | None] = {
    "default": None,
    "cpu": CHART / "values-cpu.yaml",
    "kserve-gpu": CHART / "values-kserve-gpu.yaml",
    "triton": CHART / "values-triton.yaml",
}
SERVICES = ("generation", "verification", "proposer", "registry", "runtime")


def values_of(name: str) -> dict[str, Any]:
    """The user-supplied values of setup ``name`` ({} for the defaults)."""
    path = VALUES_FILES[name]
    return {} if path is None else dict(yaml.safe_load(path.read_text()) or {})


def render_values(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rendered Kubernetes document for ``values`` (empty documents dropped)."""
    import helm_python as helm

    with helm.Chart.load(str(CHART)) as chart:
        manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(manifests.items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append(doc)
    return docs


@functools.cache
def _render_cached(name: str) -> str:
    return json.dumps(render_values(values_of(name)))


def render(name: str) -> list[dict[str, Any]]:
    """Rendered documents of setup ``name`` (a fresh copy; rendering is cached)."""
    docs: list[dict[str, Any]] = json.loads(_render_cached(name))
    return docs


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Documents of ``kind``."""
    return [d for d in docs if d.get("kind") == kind]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The single document of ``kind`` named ``name``; AssertionError listing what exists."""
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in by_kind(docs, kind)])
    return found[0]


def full(component: str) -> str:
    """Object name of ``component`` in the test release."""
    return f"{RELEASE}-evoharness-{component}"
