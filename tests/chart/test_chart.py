"""The Helm chart: strict lint and offline render (helm-python-sdk) for every supported setup,
every manifest validated against Kubernetes' schemas (kubernetes-validate, strict) and the
CRDs (KServe InferenceService, prometheus-operator ServiceMonitor/PrometheusRule) with
jsonschema, the rendered service configs loaded by the services' own settings classes, and
bad values refused at install time by values.schema.json."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.helpers import (
    CHART,
    K8S_VERSION,
    RELEASE,
    SERVICES,
    VALUES_FILES,
    by_kind,
    full,
    one,
    render,
    render_values,
    values_of,
)
from tests.conftest import require

SETUPS = list(VALUES_FILES)
CRD_KINDS = {"InferenceService", "ServiceMonitor", "PrometheusRule"}


@pytest.mark.parametrize("setup", SETUPS)
def test_lint_strict_has_no_warnings(setup: str) -> None:
    import helm_python as helm

    report = helm.lint(str(CHART), values_of(setup), strict=True, kube_version=f"v{K8S_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("setup", SETUPS)
def test_every_manifest_is_valid_kubernetes(setup: str) -> None:
    import kubernetes_validate

    docs = render(setup)
    assert len(docs) > 10
    checked = 0
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {exc}")
        checked += 1
    assert checked >= 10


def _strict(schema: Any) -> Any:
    """Copy of a CRD's OpenAPI schema where objects with ``properties`` reject unknown
    fields (the API server prunes them silently; we want typos to fail)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _crd_errors(doc: dict[str, Any], schema_file: Path) -> list[str]:
    import jsonschema

    require(schema_file.is_file(), f"CRD schema {schema_file} is missing")
    crd = json.loads(schema_file.read_text())
    group, version = doc["apiVersion"].split("/")
    assert crd["group"] == group and crd["kind"] == doc["kind"]
    schema = _strict(crd["versions"][version])
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)
    ]


def test_inferenceservice_matches_the_kserve_crd(shared_dir: Path) -> None:
    docs = render("kserve-gpu")
    isvc = one(docs, "InferenceService", full("generator"))
    assert _crd_errors(isvc, shared_dir / "schemas/kserve/inferenceservice.crd-schema.json") == []
    pred = isvc["spec"]["predictor"]
    c = pred["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pred["nodeSelector"] and pred["tolerations"]
    assert (pred["minReplicas"], pred["maxReplicas"]) == (1, 4)
    env = {e["name"]: e for e in c["env"]}
    assert env["STORAGE_URI"]["value"].startswith("s3://")
    assert c["command"][-1] == "services.generation.backends.kserve_predictor"
    assert c["image"].endswith(":0.1.0-gpu")  # the GPU variant, only for the predictor
    deps = by_kind(docs, "Deployment")
    assert all(
        not d["spec"]["template"]["spec"]["containers"][0]["image"].endswith("-gpu") for d in deps
    )


def test_registry_migrations_run_once_as_a_hook() -> None:
    """A pre-install/pre-upgrade Job migrates the registry database; the registry pods then
    start without migrating (no race between replicas); disabling the Job restores it."""
    docs = render("default")
    (job,) = by_kind(docs, "Job")
    assert "pre-install" in job["metadata"]["annotations"]["helm.sh/hook"]
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["args"] == ["registry", "migrate"]
    assert c["env"][0]["name"] == "EVOHARNESS_DATABASE_URL"
    assert yaml.safe_load(_configs(docs)["registry.yaml"])["registry"]["migrate"] is False
    off = render_values({"migrations": {"enabled": False}})
    assert by_kind(off, "Job") == []
    assert yaml.safe_load(_configs(off)["registry.yaml"])["registry"]["migrate"] is True


@pytest.mark.parametrize("setup", SETUPS)
def test_monitoring_objects_match_the_prometheus_operator_crds(
    setup: str, shared_dir: Path
) -> None:
    docs = render(setup)
    schemas = shared_dir / "schemas/prometheus-operator"
    sm = one(docs, "ServiceMonitor", f"{RELEASE}-evoharness")
    rule = one(docs, "PrometheusRule", f"{RELEASE}-evoharness")
    assert _crd_errors(sm, schemas / "servicemonitor.crd-schema.json") == []
    assert _crd_errors(rule, schemas / "prometheusrule.crd-schema.json") == []
    # the ServiceMonitor selects exactly the Services that expose a metrics port
    sel = sm["spec"]["selector"]["matchLabels"]
    scraped = [
        s
        for s in by_kind(docs, "Service")
        if all(s["metadata"]["labels"].get(k) == v for k, v in sel.items())
    ]
    want = {full(n) for n in (*SERVICES, "worker")}
    assert want <= {s["metadata"]["name"] for s in scraped}
    for s in scraped:
        assert "metrics" in {p["name"] for p in s["spec"]["ports"]}


def test_crd_check_catches_a_typo(shared_dir: Path) -> None:
    """The strict CRD check is not vacuous: a misspelt field fails it."""
    isvc = copy.deepcopy(one(render("kserve-gpu"), "InferenceService", full("generator")))
    isvc["spec"]["predictor"]["minReplica"] = 1
    errors = _crd_errors(isvc, shared_dir / "schemas/kserve/inferenceservice.crd-schema.json")
    assert any("minReplica" in e for e in errors)


def test_kubernetes_validation_catches_a_typo() -> None:
    import kubernetes_validate

    dep = copy.deepcopy(one(render("default"), "Deployment", full("runtime")))
    dep["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, K8S_VERSION, strict=True)


def _pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Pod templates of every Deployment and Job, by object name."""
    return {
        d["metadata"]["name"]: d["spec"]["template"]
        for d in by_kind(docs, "Deployment") + by_kind(docs, "Job")
    }


@pytest.mark.parametrize("setup", SETUPS)
def test_pods_are_hardened_probed_and_sized(setup: str) -> None:
    docs = render(setup)
    pods = _pod_specs(docs)
    assert {full(n) for n in (*SERVICES, "worker")} <= set(pods)
    jobs = {j["metadata"]["name"] for j in by_kind(docs, "Job")}
    for name, tpl in pods.items():
        spec = tpl["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["automountServiceAccountToken"] is False, name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert c["resources"]["requests"] and c["resources"]["limits"], name
            assert name in jobs or "readinessProbe" in c, name
    for svc in SERVICES:
        c = pods[full(svc)]["spec"]["containers"][0]
        grpc_port = next(p["containerPort"] for p in c["ports"] if p["name"] == "grpc")
        for probe in ("readinessProbe", "livenessProbe"):
            assert c[probe]["grpc"]["port"] == grpc_port, (svc, probe)
        assert c["args"][:2] == ["serve", svc]
    pdbs = {p["metadata"]["name"] for p in by_kind(docs, "PodDisruptionBudget")}
    comps = values_of(setup).get("components", {})
    for svc in SERVICES:
        enabled = comps.get(svc, {}).get("pdb", {}).get("enabled", svc != "proposer")
        assert (full(svc) in pdbs) == enabled, svc


@pytest.mark.parametrize("setup", SETUPS)
def test_no_secret_values_are_rendered(setup: str) -> None:
    """Credentials only as secretKeyRef to existing Secrets; the chart creates no Secret."""
    docs = render(setup)
    assert by_kind(docs, "Secret") == []
    secretish = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|DATABASE_URL")
    refs = set()
    for name, tpl in _pod_specs(docs).items():
        for c in tpl["spec"]["containers"]:
            for e in c.get("env", []):
                if secretish.search(e["name"]):
                    assert "value" not in e, (name, e["name"])
                    refs.add((e["name"], e["valueFrom"]["secretKeyRef"]["name"]))
    assert ("EVOHARNESS_S3__SECRET_KEY", "evoharness-s3") in refs
    assert ("EVOHARNESS_REGISTRY__DATABASE_URL", "evoharness-postgres") in refs
    if values_of(setup).get("llm", {}).get("enabled"):
        assert ("EVOHARNESS_LLM_API_KEY", "evoharness-llm") in refs


@pytest.mark.parametrize("setup", SETUPS)
def test_only_the_runtime_is_reachable_from_outside(setup: str) -> None:
    docs = render(setup)
    policies = by_kind(docs, "NetworkPolicy")
    assert len(policies) == 2
    open_from_anywhere = []
    for pol in policies:
        sel = pol["spec"]["podSelector"]["matchLabels"]
        for rule in pol["spec"]["ingress"]:
            if "from" not in rule:
                open_from_anywhere.append((sel, rule["ports"]))
    # exactly one rule admits any source: the runtime's gRPC port
    assert len(open_from_anywhere) == 1
    sel, ports = open_from_anywhere[0]
    assert [p["port"] for p in ports] == ["grpc"]
    for name, tpl in _pod_specs(docs).items():
        labels = tpl["metadata"]["labels"]
        matches = [
            p
            for p in policies
            if all(labels.get(k) == v for k, v in p["spec"]["podSelector"]["matchLabels"].items())
        ]
        assert len(matches) == 1, name  # every pod is covered by exactly one policy
        is_open = all(labels.get(k) == v for k, v in sel.items())
        assert is_open == (name == full("runtime")), name


def test_generator_mode_selects_the_model_server() -> None:
    sim, kserve, triton = render("default"), render("kserve-gpu"), render("triton")
    assert by_kind(sim, "InferenceService") == [] and full("triton") not in _pod_specs(sim)
    assert len(by_kind(kserve, "InferenceService")) == 1
    assert full("triton") not in _pod_specs(kserve)
    assert by_kind(triton, "InferenceService") == []
    tri = _pod_specs(triton)[full("triton")]["spec"]
    assert tri["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert any(v.get("persistentVolumeClaim") for v in tri["volumes"])
    one(triton, "Service", full("triton"))


def _configs(docs: list[dict[str, Any]]) -> dict[str, str]:
    return dict(one(docs, "ConfigMap", f"{RELEASE}-evoharness-config")["data"])


@pytest.mark.parametrize("setup", SETUPS)
def test_rendered_configs_load_with_the_services_settings(
    setup: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the pods read parses with the real settings classes (extra fields forbidden),
    and the generation backend follows generator.mode."""
    from evoharness_app.commands.serve import load_service_settings
    from services.common.settings import load_settings
    from services.generation.settings import GenerationSettings
    from workflows.backends import load_worker_settings

    for k in list(os.environ):
        if k.startswith("EVOHARNESS_"):
            monkeypatch.delenv(k)
    data = _configs(render(setup))
    loaded: dict[str, Any] = {}
    for svc in SERVICES:
        path = tmp_path / f"{svc}.yaml"
        path.write_text(data[f"{svc}.yaml"])
        _, loaded[svc] = load_service_settings(svc, path)
        assert loaded[svc].server.host == "0.0.0.0"
    (tmp_path / "worker.yaml").write_text(data["worker.yaml"])
    worker = load_worker_settings(tmp_path / "worker.yaml")
    assert worker.worker.temporal_address == values_of(setup).get("temporal", {}).get(
        "address", "temporal-frontend.temporal.svc.cluster.local:7233"
    )
    assert worker.worker.generation_address == loaded["runtime"].runtime.generation_address
    mode = values_of(setup).get("generator", {}).get("mode", "sim")
    gen = loaded["generation"]
    assert gen.backend == mode
    if mode != "sim":
        assert gen.generator_id and gen.oip.url
    pinned = values_of(setup).get("generator", {}).get("capabilities")
    assert (gen.capabilities is None) == (not pinned)
    if pinned:  # values-kserve-gpu.yaml pins what the served pipeline honours
        assert gen.capabilities is not None
        assert gen.capabilities.model_dump(include=set(pinned)) == pinned
    if mode == "kserve":
        (tmp_path / "p.yaml").write_text(data["predictor.yaml"])
        pred = load_settings(GenerationSettings, tmp_path / "p.yaml")
        assert pred.backend == "diffusers" and pred.diffusers.model_path == "/mnt/models"
        assert pred.generator_id == gen.generator_id
    if mode == "triton":
        (tmp_path / "t.yaml").write_text(data["triton.yaml"])
        tri = load_settings(GenerationSettings, tmp_path / "t.yaml")
        assert tri.generator_id == gen.generator_id and tri.diffusers.device == "cuda"


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"generator": {"mode": "gpu"}}, "/generator/mode"),
        ({"generator": {"mode": "kserve"}}, "/generator/generatorId"),
        ({"generator": {"capabilities": {"layout": "boxes"}}}, "/generator/capabilities/layout"),
        ({"s3": {"secretKey": "hunter2"}}, "/s3"),
        ({"components": {"runtime": {"port": 0}}}, "/components/runtime/port"),
        ({"securityContext": {"readOnlyRootFilesystem": False}}, "/securityContext"),
        ({"temporal": {"address": "http://temporal:7233"}}, "/temporal/address"),
        ({"replicaCount": 3}, "replicaCount"),
    ],
)
def test_bad_values_fail_at_install_with_the_field_named(
    values: dict[str, Any], where: str
) -> None:
    import helm_python as helm

    with pytest.raises(helm.HelmValuesError) as err:
        render_values(values)
    assert where in str(err.value)


def test_dashboard_ships_as_a_sidecar_configmap() -> None:
    cm = one(render("default"), "ConfigMap", f"{RELEASE}-evoharness-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(cm["data"]["evoharness.json"])
    assert shipped == json.loads((CHART / "dashboards" / "evoharness.json").read_text())
    assert shipped["uid"] and len(shipped["panels"]) >= 10
