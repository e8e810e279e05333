"""The HTML run report: ``render_report(run, out_dir) -> out_dir/report.html``."""

from evoharness.report.agent import AgentTrajectory, AgentTurnView, agent_trajectory
from evoharness.report.models import (
    ConstraintVerdict,
    ImagePair,
    PassRate,
    RunReportInput,
    VerifierScores,
)
from evoharness.report.render import ReportError, render_report

__all__ = [
    "AgentTrajectory",
    "AgentTurnView",
    "ConstraintVerdict",
    "ImagePair",
    "PassRate",
    "ReportError",
    "RunReportInput",
    "VerifierScores",
    "agent_trajectory",
    "render_report",
]
