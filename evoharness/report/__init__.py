"""The HTML run report: ``render_report(run, out_dir) -> out_dir/report.html``."""

from evoharness.report.models import ConstraintVerdict, ImagePair, PassRate, RunReportInput
from evoharness.report.render import ReportError, render_report

__all__ = [
    "ConstraintVerdict",
    "ImagePair",
    "PassRate",
    "ReportError",
    "RunReportInput",
    "render_report",
]
