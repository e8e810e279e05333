"""Cells of the HTML run report: values formatted for display (shares, deltas, intervals,
numbers, ids, durations) and the pass-rate table rows built from them. Plain strings and
numbers only; the page is ``evoharness.report.render``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from evoharness.report.models import PassRate


def short_id(value: str, n: int = 12) -> str:
    """The first ``n`` characters of a content hash, for display (full id in a tooltip)."""
    return value[:n] if value else "—"


def fmt_pct(x: float | None) -> str:
    """A share (0..1) as ``52.1%``; "—" for None."""
    return "—" if x is None else f"{100.0 * x:.1f}%"


def fmt_delta(x: float | None, pct: bool = True) -> str:
    """A signed difference: ``+1.2 pp`` of shares (``pct``), else ``+0.012``; "—" for None."""
    if x is None:
        return "—"
    return f"{100.0 * x:+.1f} pp" if pct else f"{x:+.3f}"


def fmt_ci(ci: tuple[float, float] | None, delta: bool = False) -> str:
    """``[52.1%, 63.0%]`` (``delta``: ``[+1.2, +9.8] pp``); "" without an interval."""
    if ci is None:
        return ""
    lo, hi = ci
    if delta:
        return f"[{100.0 * lo:+.1f}, {100.0 * hi:+.1f}] pp"
    return f"[{100.0 * lo:.1f}%, {100.0 * hi:.1f}%]"


def fmt_num(x: Any) -> str:
    """A number for display: floats to 4 significant digits (whole above a million)."""
    if isinstance(x, float):
        return f"{x:,.4g}" if abs(x) < 1e6 else f"{x:,.0f}"
    return str(x)


def to_json(value: Any) -> str:
    """Canonical JSON for display (keys sorted, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def duration(start: datetime, end: datetime | None) -> str:
    """``1h 02m 03s`` / ``2m 03s`` from ``start`` to ``end``; "running" without an end."""
    if end is None:
        return "running"
    secs = int((end - start).total_seconds())
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


def rate_rows(rates: dict[str, Any], order: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Table rows of ``PassRate``s by name (names in ``order`` first, the rest sorted):
    before, after, delta and their intervals formatted, bar widths in percent."""
    keys = [k for k in order if k in rates] + sorted(k for k in rates if k not in order)
    return [
        {
            "name": k,
            "before": fmt_pct(rates[k].before),
            "after": fmt_pct(rates[k].after),
            "before_w": round(100 * rates[k].before, 1),
            "after_w": round(100 * rates[k].after, 1),
            "delta": fmt_delta(rates[k].delta),
            "delta_raw": rates[k].delta,
            "n": rates[k].n,
            "unit": rates[k].unit,
            "tasks": rates[k].tasks,
            "ci_before": fmt_ci(rates[k].ci_before),
            "ci_after": fmt_ci(rates[k].ci_after),
            "ci_delta": fmt_ci(rates[k].ci_delta, delta=True),
        }
        for k in keys
    ]


def rate_cells(r: PassRate | None) -> dict[str, Any]:
    """One ``PassRate``'s cells (before, after, delta, intervals), dashes for None."""
    if r is None:
        return {
            "before": "—",
            "after": "—",
            "delta": "—",
            "delta_raw": 0.0,
            "ci_before": "",
            "ci_after": "",
            "ci_delta": "",
        }
    return {
        "before": fmt_pct(r.before),
        "after": fmt_pct(r.after),
        "delta": fmt_delta(r.delta),
        "delta_raw": r.delta,
        "ci_before": fmt_ci(r.ci_before),
        "ci_after": fmt_ci(r.ci_after),
        "ci_delta": fmt_ci(r.ci_delta, delta=True),
    }
