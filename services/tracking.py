"""Experiment tracking (issue 33): the ``ExperimentTracker`` port and its one adapter, MLflow
(the optional extra ``tracking``: ``pip install 'evoharness[tracking]'``).

This is the only module that imports ``mlflow``. The worker's tracking activity
(``workflows.tracking_activities``) and the main job (``evoharness evolve main --tracking
mlflow``) reach MLflow through ``open_tracker``; nothing else knows it exists.

Runs are found again by a tag, never created twice: every run carries ``evoharness.key``
(the evolution run's id, ``<run>/round-<n>`` for a round, ``<run>/round-<n>/b<i>`` for a beam
branch) and ``ensure_run`` looks the key up before creating; a run whose logging finished
carries ``evoharness.logged = 1`` (``mark_done``), so a retried activity skips it. Nested runs
are MLflow's: the child's ``mlflow.parentRunId`` tag names its parent.

Errors: ``TrackingUnavailable`` when no URI is configured, MLflow is not installed, or the
server does not answer its health check (``GET <uri>/health``, ``timeout_s``); any error of
the MLflow client afterwards is the caller's to catch (the activity reports it once and the
run goes on).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

#: the trackers ``tracking`` may name in the run parameters
Tracker = Literal["mlflow"]
TRACKERS: tuple[str, ...] = get_args(Tracker)
#: the tag that identifies a run (looked up before a run is created)
KEY_TAG = "evoharness.key"
#: set to "1" once a run's logging is complete: a retry logs nothing more
DONE_TAG = "evoharness.logged"
#: MLflow's tag naming a nested run's parent
PARENT_TAG = "mlflow.parentRunId"
#: the experiment runs go to unless ``MLFLOW_EXPERIMENT_NAME`` names another
DEFAULT_EXPERIMENT = "evoharness"


class TrackingUnavailable(Exception):
    """Tracking cannot start: no URI, MLflow not installed, or the server does not answer.
    The message says which, and where."""


@dataclass(frozen=True)
class TrackedRun:
    """One tracked run: the tracker's id of it, and whether its logging was completed."""

    run_id: str
    done: bool = False


class ExperimentTracker(Protocol):
    """The port: what the rest of the code may ask of an experiment tracker.

    Keys are ``evoharness.key`` values (module docstring); ``timestamp_ms`` is milliseconds
    since the epoch (pass a fixed one, e.g. the workflow's clock, so a retried call writes
    the same rows); params are stringified; metrics are floats (None values are skipped)."""

    uri: str

    def ensure_run(
        self,
        key: str,
        name: str,
        parent: str | None = None,
        tags: Mapping[str, str] | None = None,
        timestamp_ms: int | None = None,
    ) -> TrackedRun:
        """The run tagged ``key``, created (nested under run id ``parent``) when none is."""
        ...

    def find(self, key: str) -> TrackedRun | None:
        """The run tagged ``key``, or None."""
        ...

    def log(
        self,
        run_id: str,
        params: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float | None] | None = None,
        step: int = 0,
        timestamp_ms: int = 0,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """Log params, metrics at ``step`` and tags to ``run_id``."""
        ...

    def log_json(self, run_id: str, doc: Any, artifact_file: str) -> None:
        """Write ``doc`` as the JSON artifact ``artifact_file`` of ``run_id``."""
        ...

    def log_path(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        """Upload a file or a whole folder as artifacts of ``run_id`` (under
        ``artifact_path``)."""
        ...

    def mark_done(self, run_id: str, end_ms: int | None = None, finish: bool = True) -> None:
        """Tag ``run_id`` as completely logged; ``finish``: also end it (status FINISHED)."""
        ...


def resolve_uri(explicit: str | None = None, configured: str | None = None) -> str:
    """The tracking URI: ``explicit`` (the run parameters), else ``configured`` (the worker's
    ``worker.tracking_uri``), else ``$MLFLOW_TRACKING_URI``. Raises ``TrackingUnavailable``
    when none is set."""
    uri = explicit or configured or os.environ.get("MLFLOW_TRACKING_URI", "")
    if not uri:
        raise TrackingUnavailable(
            "no tracking URI: set tracking_uri in the run parameters, worker.tracking_uri "
            "in the worker's configuration, or MLFLOW_TRACKING_URI"
        )
    return uri


def check_health(uri: str, timeout_s: float = 5.0) -> None:
    """For an ``http(s)`` URI, ``GET <uri>/health`` must answer 200 within ``timeout_s``;
    raises ``TrackingUnavailable`` naming the URI and the error. Other URIs (``file:``,
    ``sqlite:``) are local stores: nothing to check."""
    if not uri.startswith(("http://", "https://")):
        return
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - http(s) only
            if resp.status != 200:
                raise TrackingUnavailable(f"MLflow at {uri}: /health answered {resp.status}")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise TrackingUnavailable(f"MLflow at {uri} is unreachable: {reason}") from None


def open_tracker(
    kind: str,
    uri: str | None = None,
    configured: str | None = None,
    experiment: str | None = None,
    timeout_s: float = 5.0,
) -> ExperimentTracker:
    """The tracker ``kind`` (one of ``TRACKERS``) at ``resolve_uri(uri, configured)``, its
    server checked (``check_health``). Raises ``ValueError`` for an unknown kind and
    ``TrackingUnavailable`` when it cannot be used."""
    if kind not in TRACKERS:
        raise ValueError(f"tracking: unknown tracker {kind!r} (one of {', '.join(TRACKERS)})")
    resolved = resolve_uri(uri, configured)
    check_health(resolved, timeout_s)
    return MlflowTracker(resolved, experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME"))


def _ms(timestamp_ms: int | None) -> int | None:
    return int(timestamp_ms) if timestamp_ms else None


class MlflowTracker:
    """``ExperimentTracker`` over ``mlflow.MlflowClient`` (thread-safe: no active-run state,
    unlike the fluent ``mlflow.start_run`` API, so the worker's activity threads may share
    it). ``experiment``: created on first use. Raises ``TrackingUnavailable`` when MLflow is
    not installed."""

    def __init__(self, uri: str, experiment: str | None = None) -> None:
        try:
            from mlflow import MlflowClient
        except ImportError:
            raise TrackingUnavailable(
                "MLflow is not installed: pip install 'evoharness[tracking]'"
            ) from None
        self.uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment = experiment or DEFAULT_EXPERIMENT
        self._experiment_id: str | None = None

    def experiment_id(self) -> str:
        """The experiment's id (created when missing; a concurrent creation is looked up)."""
        if self._experiment_id is None:
            from mlflow.exceptions import MlflowException

            exp = self.client.get_experiment_by_name(self.experiment)
            if exp is None:
                try:
                    self._experiment_id = self.client.create_experiment(self.experiment)
                except MlflowException:  # created meanwhile
                    exp = self.client.get_experiment_by_name(self.experiment)
                    if exp is None:
                        raise
                    self._experiment_id = exp.experiment_id
            else:
                self._experiment_id = exp.experiment_id
        return self._experiment_id

    def find(self, key: str) -> TrackedRun | None:
        """The run tagged ``evoharness.key = key`` (the first, when several were made)."""
        if "'" in key:
            raise ValueError(f"tracking key {key!r}: quotes are not allowed")
        runs = self.client.search_runs(
            [self.experiment_id()],
            filter_string=f"tags.`{KEY_TAG}` = '{key}'",
            max_results=1,
            order_by=["attributes.start_time ASC"],
        )
        if not runs:
            return None
        run = runs[0]
        return TrackedRun(run.info.run_id, run.data.tags.get(DONE_TAG) == "1")

    def ensure_run(
        self,
        key: str,
        name: str,
        parent: str | None = None,
        tags: Mapping[str, str] | None = None,
        timestamp_ms: int | None = None,
    ) -> TrackedRun:
        """See ``ExperimentTracker.ensure_run``."""
        found = self.find(key)
        if found is not None:
            return found
        all_tags = {KEY_TAG: key, **(tags or {})}
        if parent:
            all_tags[PARENT_TAG] = parent
        run = self.client.create_run(
            self.experiment_id(), start_time=_ms(timestamp_ms), tags=all_tags, run_name=name
        )
        return TrackedRun(run.info.run_id)

    def log(
        self,
        run_id: str,
        params: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float | None] | None = None,
        step: int = 0,
        timestamp_ms: int = 0,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """See ``ExperimentTracker.log``. Params longer than MLflow's limit (6,000
        characters) are cut with a marker."""
        from mlflow.entities import Metric, Param, RunTag

        ps = [Param(k, _param(v)) for k, v in (params or {}).items()]
        ms = [
            Metric(k, float(v), int(timestamp_ms), int(step))
            for k, v in (metrics or {}).items()
            if v is not None
        ]
        ts = [RunTag(k, str(v)) for k, v in (tags or {}).items()]
        # MLflow's log_batch takes at most 100 params and 1000 metrics per call
        for i in range(0, max(len(ps), len(ms), len(ts), 1), 100):
            self.client.log_batch(run_id, ms[i : i + 100], ps[i : i + 100], ts[i : i + 100])

    def log_json(self, run_id: str, doc: Any, artifact_file: str) -> None:
        """See ``ExperimentTracker.log_json``."""
        self.client.log_text(run_id, json.dumps(doc, indent=2, sort_keys=True), artifact_file)

    def log_path(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        """See ``ExperimentTracker.log_path``."""
        if path.is_dir():
            self.client.log_artifacts(run_id, str(path), artifact_path)
        else:
            self.client.log_artifact(run_id, str(path), artifact_path)

    def mark_done(self, run_id: str, end_ms: int | None = None, finish: bool = True) -> None:
        """See ``ExperimentTracker.mark_done``."""
        self.client.set_tag(run_id, DONE_TAG, "1")
        if finish:
            self.client.set_terminated(run_id, "FINISHED", end_time=_ms(end_ms))


def _param(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 6000 else text[:5980] + "…(cut)"


def log_outputs(
    tracker: ExperimentTracker,
    key: str,
    paths: Sequence[Path],
    metrics: Mapping[str, float | None] | None = None,
) -> str:
    """Upload ``paths`` (files under their own names at the artifact root, folders under
    their names; missing ones are skipped) and ``metrics`` to the run keyed ``key`` (an
    evolution run the worker tracked); returns its id. Uploading again overwrites the same
    artifacts: idempotent. Raises ``TrackingUnavailable`` when no run has that key."""
    run = tracker.find(key)
    if run is None:
        raise TrackingUnavailable(f"no tracked run with {KEY_TAG} = {key!r} at {tracker.uri}")
    for path in paths:
        if path.is_dir():
            tracker.log_path(run.run_id, path, path.name)
        elif path.is_file():
            tracker.log_path(run.run_id, path)
    if metrics:
        tracker.log(run.run_id, metrics=metrics)
    return run.run_id
