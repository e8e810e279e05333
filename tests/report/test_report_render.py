"""render_report on a synthetic run: content, escaping, self-containment, image modes, errors."""

from __future__ import annotations

import base64
import re
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from pydantic import ValidationError

from evoharness.report import ReportError, RunReportInput, render_report
from tests.report.sample import H0, H1, make_run


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.imgs: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for k, v in attrs:
            if k in ("src", "href", "srcset", "data", "poster", "action") and v is not None:
                self.refs.append((tag, k, v))
        if tag == "img":
            self.imgs.append(dict(attrs))


def _parse(html: str) -> _Refs:
    p = _Refs()
    p.feed(html)
    return p


def test_report_shows_everything(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    out = render_report(run, tmp_path / "out")
    assert out == tmp_path / "out" / "report.html"
    html = out.read_text(encoding="utf-8")
    for needle in (
        "run-42",
        H0,
        H1,
        "sim-v1",
        # pass rates before/after per split and tag
        "59.0%",
        "71.0%",
        "+12.0 pp",
        "counting",
        "+35.0 pp",
        "-1.0 pp",
        # accepted patch diff by responsibility
        "/tools/tools/-",
        "counts drift above n=2 without boxes",
        # every No-Patch decision and attribution with its reason
        "no candidate passed the gate: best r2-c1 regressed preservation by 3.0 pp",
        "flip rate 0.5: generator noise across seeds",
        # candidates with gate figures, rejected ones with their reason
        "r1-c2",
        "0.41",
        "Δtarget not significant",
        "outside the boundary contract of tools",
        # cost per round and totals
        "812.5",
        "2,016",
        "1.04",
    ):
        assert needle in html, needle
    assert html.count('class="round ') == 2
    assert 'class="round no_patch"' in html and 'class="round accepted"' in html


def test_prompt_text_is_escaped(tmp_path: Path) -> None:
    html = render_report(make_run(tmp_path), tmp_path / "out").read_text(encoding="utf-8")
    assert "<b>not bold</b>" not in html
    assert "&lt;b&gt;not bold&lt;/b&gt;" in html


def test_embedded_images_are_self_contained(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    html = render_report(run, tmp_path / "out").read_text(encoding="utf-8")
    parsed = _parse(html)
    assert not re.search(r"https?://", html)  # no remote or presigned links at all
    assert len(parsed.imgs) == 2 * len(run.image_pairs)
    for _, _, ref in parsed.refs:
        assert ref.startswith("data:image/png;base64,"), ref[:40]
    first = parsed.imgs[0]["src"]
    assert first is not None
    assert base64.b64decode(first.split(",", 1)[1]) == run.image_pairs[0].before_png.read_bytes()
    assert list((tmp_path / "out").iterdir()) == [tmp_path / "out" / "report.html"]


def test_copy_mode_puts_images_beside_the_html(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    out = render_report(run, tmp_path / "out", images="copy")
    parsed = _parse(out.read_text(encoding="utf-8"))
    srcs = [img["src"] for img in parsed.imgs]
    assert all(s is not None and s.startswith("images/") for s in srcs)
    for pair, (before, after) in zip(
        run.image_pairs, zip(srcs[::2], srcs[1::2], strict=True), strict=True
    ):
        assert (out.parent / str(before)).read_bytes() == pair.before_png.read_bytes()
        assert (out.parent / str(after)).read_bytes() == pair.after_png.read_bytes()
    # identical files are stored once (content-addressed names)
    assert len(list((out.parent / "images").iterdir())) == 2


def test_missing_or_non_png_image_names_the_file_and_writes_nothing(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    run.image_pairs[1].after_png.unlink()
    with pytest.raises(ReportError, match=r"after1\.png: cannot read image"):
        render_report(run, tmp_path / "out", images="copy")
    assert not (tmp_path / "out").exists()
    run = make_run(tmp_path)
    run.image_pairs[0].before_png.write_bytes(b"GIF89a not a png")
    with pytest.raises(ReportError, match=r"before0\.png: not a PNG"):
        render_report(run, tmp_path / "out")
    assert not (tmp_path / "out" / "report.html").exists()


def test_empty_run_renders(tmp_path: Path) -> None:
    run = make_run(tmp_path).model_copy(
        update={"rounds": [], "image_pairs": [], "tag_pass_rates": {}, "finished_at": None}
    )
    html = render_report(run, tmp_path / "out").read_text(encoding="utf-8")
    assert "No rounds ran." in html and "No image pairs recorded." in html and "running" in html


def test_input_model_rejects_bad_values(tmp_path: Path) -> None:
    doc = make_run(tmp_path).model_dump(mode="json")
    RunReportInput.model_validate(doc)  # the JSON form round-trips
    bad = dict(doc, finished_at=(make_run(tmp_path).started_at - timedelta(seconds=1)).isoformat())
    with pytest.raises(ValidationError, match="is before started_at"):
        RunReportInput.model_validate(bad)
    bad = dict(doc, split_pass_rates={"target": {"before": 1.2, "after": 0.5}})
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        RunReportInput.model_validate(bad)


def _candidate_rows(html: str) -> dict[str, str]:
    """candidate id → the text of its row plus the "why" row under it."""
    rows: dict[str, str] = {}
    for m in re.finditer(
        r"<tr>\s*<td><code>(r\d-c\d)</code>(.*?)</tr>\s*<tr class=\"why\">(.*?)</tr>", html, re.S
    ):
        rows[m.group(1)] = re.sub(r"<[^>]+>", " ", m.group(2) + m.group(3))
    return rows


def test_gate_rejected_candidates_are_labelled_rejected_with_the_reason(tmp_path: Path) -> None:
    """A candidate the gate refused is "rejected by the gate" with its reason, not
    "validated" (issue 14 item 8); the reason sits in its own full-width row."""
    html = render_report(make_run(tmp_path), tmp_path / "out").read_text()
    rows = _candidate_rows(html)
    assert set(rows) == {"r1-c1", "r1-c2", "r1-c3", "r2-c1", "r2-c2"}
    assert "rejected by the gate" in rows["r1-c2"] and "validated" not in rows["r1-c2"]
    assert "Δtarget not significant" in rows["r1-c2"]
    assert "rejected by the gate" in rows["r2-c1"] and "regression 3.0 pp" in rows["r2-c1"]
    assert "rejected by the checks" in rows["r1-c3"] and "boundary contract" in rows["r1-c3"]
    assert "accepted" in rows["r1-c1"]


def test_every_answer_and_attribution_is_shown(tmp_path: Path) -> None:
    """What each proposer answered is beside its candidate — the patch's rationale and ops,
    or the raw answer the checks refused — and every cluster's attribution with the
    localizer's reasons, not only the No-Patch ones (issue 20: the report shows the LLM's
    answers, rejections and decisions)."""
    html = render_report(make_run(tmp_path), tmp_path / "out").read_text()
    rows = _candidate_rows(html)
    assert "llm answer:" in rows["r1-c3"]
    assert "&#34;path&#34;: &#34;/policy/x&#34;" in rows["r1-c3"]  # the raw answer, escaped
    assert "rule answer:" in rows["r1-c1"]
    assert "counts drift above n=2 without boxes — add /tools/tools/-" in rows["r1-c1"]
    assert "localizer chose tools: the count is wrong on every seed" in html
    assert "flip rate 0.5: generator noise across seeds" in html


def test_each_change_says_its_scope(tmp_path: Path) -> None:
    """A global policy change "applies to every prompt"; a tool with a trigger names it
    (issue 14 item 9)."""
    html = render_report(make_run(tmp_path), tmp_path / "out").read_text()
    assert "<strong>Scope:</strong> prompts with count" in html  # the accepted layout patch
    rows = _candidate_rows(html)
    assert "scope: applies to every prompt" in rows["r1-c2"]  # guidance_scale, policy
    assert "scope: applies to every prompt" in rows["r2-c1"]  # a best-of-N stage


def test_image_cards_carry_their_label(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    run = run.model_copy(
        update={
            "image_pairs": [
                run.image_pairs[0].model_copy(update={"label": "regressed"}),
                run.image_pairs[1].model_copy(update={"label": "example of patch r1-c1"}),
            ]
        }
    )
    html = render_report(run, tmp_path / "out").read_text()
    assert '<span class="badge regressed">regressed</span>' in html
    assert '<span class="badge example">example of patch r1-c1</span>' in html


class _Table(HTMLParser):
    """The cells of ``<table id="verifier-scores">``'s body rows, by ``data-split``."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self.classes: dict[str, str] = {}
        self.header: list[str] = []
        self._in_table = self._in_head = False
        self._row: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "verifier-scores":
            self._in_table = True
        elif self._in_table and tag == "thead":
            self._in_head = True
        elif self._in_table and tag == "tr" and a.get("data-split"):
            self._row = str(a["data-split"])
            self.rows[self._row] = []
            self.classes[self._row] = a.get("class") or ""
        elif self._in_table and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table = False
        elif tag == "thead":
            self._in_head = False
        elif tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell).strip()
            if self._in_head:
                self.header.append(text)
            elif self._row is not None:
                self.rows[self._row].append(text)
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def test_internal_and_official_scores_side_by_side(tmp_path: Path) -> None:
    from evoharness.report import PassRate, VerifierScores

    run = make_run(tmp_path).model_copy(
        update={
            "internal_verifier": "sim-detector@0123456789ab",
            "official_verifier": "sim-inspector (GenEval rules)",
            "verifier_scores": {
                # the harness pleases the internal verifier: +20 pp internal, +2 pp official
                "target": VerifierScores(
                    internal_constraint=PassRate(before=0.50, after=0.75, n=240),
                    official_constraint=PassRate(before=0.55, after=0.60, n=240),
                    internal_geneval=PassRate(before=0.40, after=0.60, n=60),
                    official_geneval=PassRate(before=0.45, after=0.47, n=60),
                ),
                # honest gain on both
                "heldout": VerifierScores(
                    internal_constraint=PassRate(before=0.50, after=0.60, n=80),
                    official_constraint=PassRate(before=0.52, after=0.63, n=80),
                ),
            },
        }
    )
    html = render_report(run, tmp_path / "out").read_text(encoding="utf-8")
    t = _Table()
    t.feed(html)
    assert "sim-detector@0123456789ab" in html and "sim-inspector (GenEval rules)" in html
    assert t.header[:5] == [
        "split",
        "constraint pass rate, internal",
        "constraint pass rate, official",
        "GenEval overall, internal",
        "GenEval overall, official",
    ]
    target = t.rows["target"]
    # split | internal c (before, after, Δ) | official c | internal GenEval | official GenEval
    assert target[:13] == [
        "target",
        "50.0%",
        "75.0%",
        "+25.0 pp",
        "55.0%",
        "60.0%",
        "+5.0 pp",
        "40.0%",
        "60.0%",
        "+20.0 pp",
        "45.0%",
        "47.0%",
        "+2.0 pp",
    ]
    assert target[13].startswith("+18.0 pp") and "pleases the internal verifier" in target[13]
    assert "flagged" in t.classes["target"]
    heldout = t.rows["heldout"]
    assert heldout[7:13] == ["—"] * 6  # no GenEval tasks on that split
    assert heldout[13] == "-1.0 pp" and "flagged" not in t.classes["heldout"]
    # no comparison given: the section says so
    bare = render_report(make_run(tmp_path), tmp_path / "bare").read_text(encoding="utf-8")
    assert "No internal/official comparison recorded." in bare


def test_the_gate_fields_and_every_rejected_candidate_are_shown(tmp_path: Path) -> None:
    """Issue 16: look, seeds, Holm-adjusted p, per-family regression, scope probes, the
    preservation set and the reject reasons; rejected candidates listed as rejected; the
    evolution mode at the top; the untouched test split among the split figures."""
    html = render_report(make_run(tmp_path), tmp_path / "out").read_text()
    rows = _candidate_rows(html)
    text = {k: " ".join(v.split()) for k, v in rows.items()}
    assert (
        "Holm 0.82 · look 2" in text["r1-c2"] and "seeds 4, 5, 6, 7, 8, 9, 10, 11" in text["r1-c2"]
    )
    assert "9/60 tasks changed" in text["r1-c2"]
    assert "single_object (7 tasks) Δ -5.4 pp, regression 5.4 pp / ε 1.8 pp" in text["r1-c2"]
    assert "counting (5 tasks)" in text["r1-c2"]
    assert "Holm 0.006 · look 1" in text["r1-c1"]
    assert "scope probes (count): passed" in text["r1-c1"] and "50.0% → 75.0%" in text["r1-c1"]
    assert "scope probes (bicycle): scope_regression" in text["r2-c2"]
    assert "rejected by the checks" in text["r2-c2"]
    rejected = re.search(r'<table class="rejected">(.*?)</table>', html, re.S)
    assert rejected is not None
    listed = dict(
        re.findall(
            r'data-candidate="(r\d-c\d)">.*?<span class="badge rejected">([^<]*)</span>', html, re.S
        )
    )
    assert listed == {
        "r1-c2": "gate: Δtarget not significant",
        "r1-c3": "checks: op 0 (add /policy/x) is outside the boundary contract of tools",
        "r2-c1": "gate: regression",
        "r2-c2": "checks: scope_regression",
    }
    assert (
        "preservation set: 14 of 20 preservation prompts the parent passed on seeds 0, 1, 2, 3"
        in html
    )
    assert "17 of 24 object classes" in html
    assert (
        'id="mode"' in html and "label-free (constraints read from each prompt by rules-v1@" in html
    )
    assert re.search(r"<td>test</td>\s*<td class=\"num\">58.0%</td>", html)
    assert re.search(r"Rejected candidates</div><div class=\"value\">4<", html)


def test_an_empty_or_fallback_preservation_set_is_shown(tmp_path: Path) -> None:
    from evoharness.trace.preservation import EMPTY_NOTE

    run = make_run(tmp_path)
    r1, r2 = run.rounds
    assert r1.preservation is not None and r2.preservation is None
    empty = r1.preservation.model_copy(
        update={"task_ids": [], "families": {}, "notes": [EMPTY_NOTE]}
    )
    gated = [c for c in r1.candidates if c.gate is not None]
    assert gated
    note = "preservation set empty: no preservation verdicts, so regression was checked on held-out only"
    cands = [
        c.model_copy(update={"gate": c.gate.model_copy(update={"notes": [note]})})
        if c.gate is not None
        else c
        for c in r1.candidates
    ]
    fb_note = "preservation fallback: kept the 3 of 20 passed on at least 50% of them"
    fb = r1.preservation.model_copy(
        update={
            "task_ids": ["p0", "p1", "p2"],
            "fallback": True,
            "min_pass_rate": 0.5,
            "notes": [fb_note],
        }
    )
    run = run.model_copy(
        update={
            "rounds": [
                r1.model_copy(update={"preservation": empty, "candidates": cands}),
                r2.model_copy(update={"preservation": fb}),
            ]
        }
    )
    html = render_report(run, tmp_path / "out").read_text(encoding="utf-8")
    assert f"<strong>{EMPTY_NOTE}</strong>" in html
    assert "0 of 20 preservation prompts" in html
    assert html.count(f"not checked: {note}") == len(gated)
    assert fb_note in html and "passed on at least 50% of seeds" in html
    bare = render_report(make_run(tmp_path), tmp_path / "bare").read_text(encoding="utf-8")
    assert "preservation set empty" not in bare and "not checked:" not in bare
    assert "at least 50%" not in bare


def test_prompts_with_nothing_checkable_are_counted(tmp_path: Path) -> None:
    """A label-free run shows how many prompts the extractor read nothing checkable from, of
    how many, and names them (the first ``NOTHING_CHECKABLE_SHOWN``, then "and N more");
    a run with benchmark labels (None) shows no such count (issue 19)."""
    from evoharness.report.render import NOTHING_CHECKABLE_SHOWN

    ids = [f"t2i/texture_train/{i}" for i in range(NOTHING_CHECKABLE_SHOWN + 3)]
    run = make_run(tmp_path).model_copy(update={"nothing_checkable": ids, "prompts_read": 400})
    html = render_report(run, tmp_path / "out").read_text(encoding="utf-8")
    kpi = re.search(r'id="nothing-checkable-count".*?</div></div>', html, re.S)
    assert kpi is not None and re.search(rf">{len(ids)} <span[^>]*>of 400<", kpi.group(0))
    line = re.search(r'<p class="reason" id="nothing-checkable">.*?</p>', html, re.S)
    assert line is not None and f"from {len(ids)} of 400 prompt(s)" in line.group(0)
    assert (
        ids[0] in line.group(0) and ids[-1] not in line.group(0) and "and 3 more" in line.group(0)
    )
    zero = make_run(tmp_path).model_copy(update={"nothing_checkable": [], "prompts_read": 9})
    html0 = render_report(zero, tmp_path / "zero").read_text(encoding="utf-8")
    assert 'id="nothing-checkable-count"' in html0 and 'id="nothing-checkable"' not in html0
    bare = render_report(make_run(tmp_path), tmp_path / "bare").read_text(encoding="utf-8")
    assert "nothing-checkable" not in bare


def test_the_promotion_decision_is_shown_moved_or_refused(tmp_path: Path) -> None:
    """Issue 27 item 3, on the page: whether the channel was moved to the run's harness or
    refused, with the comparison the decision rests on."""
    from evoharness.report.models import PromotionRecord

    refused = PromotionRecord(
        channel="dev",
        moved=False,
        line="channel dev not moved: this run's harness reg-b is not better than what it "
        "serves (reg-a): 0.400 vs 0.450 constraint pass rate on the test split, 80 verdicts, "
        "same tasks and seeds; --force-promote moves it anyway",
        candidate_registration="reg-b",
        current_registration="reg-a",
        basis="test split",
        candidate_rate=0.4,
        current_rate=0.45,
        verdicts=80,
    )
    run = make_run(tmp_path).model_copy(update={"promotion": refused})
    html = render_report(run, tmp_path / "refused").read_text(encoding="utf-8")
    m = re.search(r'<p class="reason" id="promotion" data-moved="false">(.*?)</p>', html, re.S)
    assert m, "the refused promotion is on the page"
    text = m.group(1)
    assert "not moved (refused)" in text and "<code>dev</code>" in text
    assert "test split" in text and "80 verdicts" in text
    assert '"promo-candidate">0.400<' in text and '"promo-current">0.450<' in text
    assert "<code>reg-a</code>" in text

    moved = PromotionRecord(
        channel="dev",
        moved=True,
        line="promoted reg-b to channel dev (the channel served nothing yet)",
        candidate_registration="reg-b",
    )
    run = make_run(tmp_path).model_copy(update={"promotion": moved})
    html = render_report(run, tmp_path / "moved").read_text(encoding="utf-8")
    m = re.search(r'<p class="reason" id="promotion" data-moved="true">(.*?)</p>', html, re.S)
    assert m and "moved." in m.group(1) and "served nothing yet" in m.group(1)
    assert "promo-candidate" not in m.group(1)  # nothing was compared
    # no decision, no paragraph
    html = render_report(make_run(tmp_path), tmp_path / "none").read_text(encoding="utf-8")
    assert 'id="promotion"' not in html
