"""A localizer failure is reported with what failed, and only a failed proposer service is
absorbed (``workflows.backends.TracePorts.localize``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.trace.models import FailureCluster
from services.common.errors import Unavailable
from workflows.backends import (
    LEDGER,
    Proposer,
    ProposerLedger,
    TracePorts,
    WorkerSection,
    WorkerSettings,
)

CLUSTER = FailureCluster(
    cluster_id="k0",
    responsibility_hint="policy",
    constraint_type="count",
    symptom="count_wrong",
    members=[("t0", "c0")],
)


def _ports(tmp_path: Path, exc: Exception) -> TracePorts:
    def localize(clusters: list[FailureCluster], harness: Harness) -> Any:
        raise exc

    settings = WorkerSettings(worker=WorkerSection(store="local", local_dir=str(tmp_path)))
    return TracePorts(settings, verifier="sim", proposer_impl=Proposer(localize, None))


def _in_activity(ports: TracePorts) -> tuple[Any, ProposerLedger]:
    ledger = ProposerLedger()
    token = LEDGER.set(ledger)
    try:
        return ports.localize([CLUSTER], Harness()), ledger
    finally:
        LEDGER.reset(token)


def test_an_unavailable_proposer_service_is_recorded_with_what_failed(tmp_path: Path) -> None:
    out, ledger = _in_activity(_ports(tmp_path, TimeoutError()))
    assert out == []
    ((cluster, reason, detail, _),) = ledger.failures
    assert (cluster, reason) == ("", "localizer_error")
    # an empty message still says what failed: the exception, the clusters, the harness
    assert detail.startswith("TimeoutError: ")
    assert "[k0]" in detail and harness_id(Harness()) in detail


def test_a_defect_in_the_localizer_is_raised_not_turned_into_no_attribution(
    tmp_path: Path,
) -> None:
    with pytest.raises(TypeError, match="bug"):
        _in_activity(_ports(tmp_path, TypeError("bug")))
    # outside an activity (no ledger) even a service failure is raised
    with pytest.raises(Unavailable):
        _ports(tmp_path, Unavailable("proposer down")).localize([CLUSTER], Harness())
