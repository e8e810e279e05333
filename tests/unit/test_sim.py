"""The embedded CPU world: simulator determinism, failure modes and their harness-level fixes,
inspector agreement with the scene manifests, bad input."""

from __future__ import annotations

import collections
import io

import pytest
from PIL import Image

from evoharness.evidence import EvidenceStatus
from evoharness.ports import Generator, Verifier
from evoharness.program import ImageRef, LayoutItem, Program
from evoharness.sim import SimGenerator, SimInspector, SimParams
from evoharness.sim.profiles import load_profile
from evoharness.sim.reader import count_tokens, read_prompt
from evoharness.tasks.models import Constraint
from evoharness.tasks.position import relative_position

SEEDS = range(40)


@pytest.fixture(scope="module")
def gen() -> SimGenerator:
    return SimGenerator()


@pytest.fixture(scope="module")
def sd15() -> SimGenerator:
    """The GLIGEN-class layout adapter profile (layout followed well, not exactly)."""
    return SimGenerator(load_profile("sd15-like"))


#: A custom world whose layout is followed exactly (for inspector tests, not a shipped profile).
EXACT_LAYOUT = SimParams(
    layout_in_box=1.0,
    layout_in_box_per_box=0.0,
    layout_small_penalty=0.0,
    layout_color_holds=1.0,
    layout_text_factor=0.0,
    layout_merge=0.0,
)


@pytest.fixture(scope="module")
def inspector() -> SimInspector:
    return SimInspector()


def _classes(manifest: dict) -> collections.Counter:
    return collections.Counter(o["class"] for o in manifest["objects"])


def test_ports_and_determinism(gen: SimGenerator) -> None:
    assert isinstance(gen, Generator)
    assert isinstance(SimInspector(ocr=False), Verifier)
    p = Program(prompt="a photo of a red car and two dogs", seed=7)
    a, b = gen.generate(p), gen.generate(p)
    assert a.png == b.png and a.manifest == b.manifest
    assert gen.generate(p.model_copy(update={"seed": 8})).png != a.png
    assert Image.open(io.BytesIO(a.png)).size == (512, 512)
    assert a.seconds > 0 and gen.generator_id.startswith("sim/sdxl-like@")
    assert SimGenerator(SimParams(miss_base=0.5)).generator_id != gen.generator_id


def test_reader_token_limit_and_clauses() -> None:
    r = read_prompt("a photo of a red car and a blue dog. two cats left of an orange cat")
    assert [(o.cls, o.colors, o.clause) for o in r.objects][:2] == [
        ("car", ["red"], 0),
        ("dog", ["blue"], 0),
    ]
    assert r.objects[2].count == 2 and r.objects[3].colors == ["orange"]
    assert r.relations and r.relations[0].relation == "left of"
    long = "word " * 80 + "a cat"
    assert count_tokens(long) > 77 and read_prompt(long).dropped == ["cat"]


def _rate(gen: SimGenerator, make, bad) -> float:
    return sum(bad(gen.generate(make(s)).manifest) for s in SEEDS) / len(SEEDS)


@pytest.mark.slow
def test_counting_fails_and_layout_helps(sd15: SimGenerator) -> None:
    # layout boxes help counting with a GLIGEN-class adapter, but a box can miss (LMD:
    # numeracy 57% with GLIGEN), so the fix is partial
    gen = sd15
    naive = _rate(
        gen,
        lambda s: Program(prompt="a photo of five clocks", seed=s),
        lambda m: _classes(m)["clock"] != 5,
    )
    boxes = [(0.05 + 0.19 * i, 0.4, 0.2 + 0.19 * i, 0.6) for i in range(5)]
    fixed = _rate(
        gen,
        lambda s: Program(
            prompt="a photo of five clocks",
            seed=s,
            layout=[LayoutItem(label="clock", box=b) for b in boxes],
        ),
        lambda m: _classes(m)["clock"] != 5,
    )
    assert naive > 0.6 and 0.0 < fixed < naive - 0.2


@pytest.mark.slow
def test_position_below_chance_and_layout_helps(gen: SimGenerator, sd15: SimGenerator) -> None:
    def wrong(m: dict) -> bool:
        a = [o["box"] for o in m["objects"] if o["class"] == "cat"]
        b = [o["box"] for o in m["objects"] if o["class"] == "dog"]
        return not (a and b and "left of" in relative_position(a[0], b[0]))

    naive = _rate(gen, lambda s: Program(prompt="a photo of a cat left of a dog", seed=s), wrong)
    gen = sd15
    layout = [
        LayoutItem(label="cat", box=(0.05, 0.3, 0.35, 0.7)),
        LayoutItem(label="dog", box=(0.6, 0.3, 0.95, 0.7)),
    ]
    fixed = _rate(
        gen,
        lambda s: Program(prompt="a photo of a cat left of a dog", seed=s, layout=layout),
        wrong,
    )
    # below chance (the composition model) naively; layout helps, not perfectly
    assert naive > 0.6 and 0.0 < fixed < naive - 0.4


@pytest.mark.slow
def test_negation_fails_and_negative_prompt_fixes(gen: SimGenerator) -> None:
    naive = _rate(
        gen,
        lambda s: Program(prompt="a photo of a bench with no dog", seed=s),
        lambda m: _classes(m)["dog"] > 0,
    )
    fixed = _rate(
        gen,
        lambda s: Program(prompt="a photo of a bench", negative_prompt="dog", seed=s),
        lambda m: _classes(m)["dog"] > 0,
    )
    assert naive > 0.4 and fixed == 0.0


@pytest.mark.slow
def test_binding_leaks_in_one_clause_less_across(gen: SimGenerator) -> None:
    def leaked(m: dict) -> bool:
        want = {"car": "red", "dog": "blue", "cup": "green"}
        return any(o["color"] != want[o["class"]] for o in m["objects"])

    naive = _rate(
        gen, lambda s: Program(prompt="a red car, a blue dog and a green cup", seed=s), leaked
    )
    fixed = _rate(
        gen, lambda s: Program(prompt="a red car. a blue dog. a green cup", seed=s), leaked
    )
    assert naive > 0.3 and fixed < naive - 0.1  # cross-clause leak is weaker, not zero


def test_long_prompt_drops_and_shorter_prompt_fixes(gen: SimGenerator) -> None:
    filler = "a very detailed beautiful photograph with soft light, " * 9
    naive = _rate(
        gen,
        lambda s: Program(prompt=filler + "showing a cat", seed=s),
        lambda m: _classes(m)["cat"] == 0,
    )
    fixed = _rate(
        gen,
        lambda s: Program(prompt="a detailed photograph showing a cat", seed=s),
        lambda m: _classes(m)["cat"] == 0,
    )
    assert naive == 1.0 and fixed < 0.15


@pytest.mark.slow
def test_text_corrupted_and_layout_text_less(gen: SimGenerator) -> None:
    prompt = 'a photo of a sign that says "WELCOME HOME"'
    naive = _rate(
        gen,
        lambda s: Program(prompt=prompt, seed=s),
        lambda m: not m["texts"] or m["texts"][0]["text"] != "WELCOME HOME",
    )
    layout = [LayoutItem(label="sign", box=(0.1, 0.4, 0.9, 0.55), text="WELCOME HOME")]
    fixed = _rate(
        gen,
        lambda s: Program(prompt="a photo of a sign", seed=s, layout=layout),
        lambda m: m["texts"][0]["text"] != "WELCOME HOME",
    )
    assert naive > 0.3 and 0.0 < fixed < naive  # layout text is corrupted too, less


def test_guidance_is_a_lever() -> None:
    p = SimParams()
    assert p.adherence(5.0, 30) > p.adherence(7.5, 30) == 1.0
    assert p.adherence(14.0, 30) > 1.0 and p.adherence(7.5, 10) > 1.0


def test_inspector_agrees_with_manifest(gen: SimGenerator, inspector: SimInspector) -> None:
    prompts = [
        "a photo of a red car. a blue dog",
        "a photo of three apples",
        "a photo of a green umbrella. a pizza. a yellow bench",
        "a photo of two purple cups. a white toaster",
    ]
    agree = total = 0
    for i, prompt in enumerate(prompts * 3):
        img = gen.generate(Program(prompt=prompt, seed=100 + i))
        seen = collections.Counter(d.cls for d in inspector.inspect(img.png, False).detections)
        truth = _classes(img.manifest)
        for cls in set(seen) | set(truth):
            total += 1
            agree += seen[cls] == truth[cls]
    assert agree / total >= 0.9


def test_inspector_evidence(inspector: SimInspector) -> None:
    gen = SimGenerator(EXACT_LAYOUT)
    layout = [
        LayoutItem(label="cat", box=(0.05, 0.3, 0.3, 0.6), color="blue"),
        LayoutItem(label="dog", box=(0.65, 0.3, 0.95, 0.6)),
        LayoutItem(label="sign", box=(0.2, 0.75, 0.8, 0.88), text="HELLO"),
    ]
    img = gen.generate(Program(prompt="a cat and a dog", seed=3, layout=layout))
    cs = [
        Constraint(constraint_id="a", type="object", subject="cat"),
        Constraint(constraint_id="b", type="count", subject="dog", min_count=1, max_count=1),
        Constraint(constraint_id="c", type="color", subject="cat", value="blue"),
        Constraint(constraint_id="d", type="color", subject="cat", value="red"),
        Constraint(
            constraint_id="e", type="position", subject="cat", value="dog", relation="left of"
        ),
        Constraint(
            constraint_id="f", type="position", subject="cat", value="dog", relation="above"
        ),
        Constraint(constraint_id="g", type="negative", subject="zebra"),
        Constraint(constraint_id="h", type="text", subject="sign", value="hello"),
        Constraint(constraint_id="i", type="attribute", subject="cat", value="oval"),
        Constraint(constraint_id="j", type="attribute", subject="cat", value="fluffy"),
    ]
    ev = inspector.verify(img, cs)
    got = [e.status for e in ev]
    P, F, U = EvidenceStatus.passed, EvidenceStatus.failed, EvidenceStatus.uncertain
    # an oval is not drawn (uncertain); a texture is, and this cat is plain
    assert got == [P, P, P, F, P, F, P, P, U, F]
    assert ev[7].decided_by == "sim-ocr" and ev[0].decided_by == "sim-inspector"
    assert [e.constraint_id for e in ev] == list("abcdefghij")
    assert inspector.verify(png=img.png, constraints=cs[:1])[0].passed  # ports.Verifier form


def test_bad_input(gen: SimGenerator, tmp_path) -> None:
    with pytest.raises(ValueError, match=r"layout\[0\]\.label"):
        gen.generate(Program(prompt="x", layout=[LayoutItem(label="bagpipe", box=(0, 0, 1, 1))]))
    with pytest.raises(ValueError, match="outside 0..1"):
        Program(prompt="x", layout=[{"label": "cat", "box": (0, 0, 1.5, 1)}])
    with pytest.raises(ValueError, match="prompt is empty"):
        Program(prompt="  ")
    bad = tmp_path / "ref.txt"
    bad.write_text("not an image")
    with pytest.raises(ValueError, match=r"references\[0\]"):
        gen.generate(Program(prompt="a cat", references=[ImageRef(key=str(bad))]))
    with pytest.raises(ValueError, match="image"):
        SimInspector(ocr=False).inspect(b"not a png")
    good = tmp_path / "ref.png"
    Image.new("RGB", (40, 30), (200, 10, 10)).save(good)
    # a reference showing no subject the world knows, bound to the cat: pasted whole (a card)
    out = gen.generate(Program(prompt="the cat from image 1", references=[ImageRef(key=str(good))]))
    assert out.manifest["references"][0]["index"] == 0
    assert out.manifest["reference_outcomes"][0]["outcome"] == "card"


def test_adjacent_layout_boxes_are_both_detected(inspector: SimInspector) -> None:
    gen = SimGenerator(EXACT_LAYOUT)
    layout = [
        LayoutItem(label="elephant", box=(0.1, 0.3, 0.4, 0.6)),
        LayoutItem(label="bicycle", box=(0.4, 0.3, 0.7, 0.6)),
    ]
    img = gen.generate(Program(prompt="an elephant and a bicycle", seed=1, layout=layout))
    seen = sorted(d.cls for d in inspector.inspect(img.png, False).detections)
    assert seen == ["bicycle", "elephant"]


def test_cli_render_and_eval(tmp_path) -> None:
    import json

    from evoharness.tasks.io import write_jsonl
    from evoharness.tasks.synthetic import build_synthetic
    from evoharness_app.cli import main

    tasks = build_synthetic(5, 6)
    write_jsonl(tasks, tmp_path / "tasks.jsonl")
    imgs = tmp_path / "imgs"
    imgs.mkdir()  # an output's folder must exist (the CLI creates no folder tree)
    for t in tasks:
        out = imgs / f"{t.task_id.replace('/', '__')}__0.png"
        assert main(["sim", "render", "--prompt", t.prompt, "--out", str(out)]) == 0
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = tmp_path / "res.jsonl"
    rc = main(
        [
            "eval",
            "geneval",
            "--images",
            str(imgs),
            "--tasks",
            str(tmp_path / "tasks.jsonl"),
            "--out",
            str(res),
        ]
    )
    assert rc == 0
    rows = [json.loads(x) for x in res.read_text().splitlines()]
    assert len(rows) == 6 and all(len(r["evidence"]) for r in rows)
    bad = tmp_path / "bad.png"
    layout = tmp_path / "layout.json"
    layout.write_text(json.dumps([{"label": "bagpipe", "box": [0, 0, 1, 1]}]))
    assert main(["sim", "render", "--prompt", "x", "--out", str(bad), "--layout", str(layout)]) == 1
    assert not bad.exists()


def test_generator_imports_stay_light() -> None:
    """The generator also runs in a numpy<2 Triton venv: no OpenCV, scikit-image or ONNX."""
    import subprocess
    import sys

    code = (
        "import sys, evoharness.sim, evoharness.sim.generator;"
        "bad=[m for m in sys.modules if m.split('.')[0] in "
        "('cv2','skimage','onnxruntime','rapidocr_onnxruntime','scipy','torch')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_geneval_baseline_looks_like_an_sd_class_model(
    gen: SimGenerator, inspector: SimInspector, shared_dir
) -> None:
    """The naive program (prompt verbatim) scored by the inspector with GenEval's rules lands
    in the ranges docs/simulator.md reports (single_object high, position and color_attr low)."""
    from evoharness.tasks.builders import build_geneval
    from evoharness.tasks.geneval_score import geneval_scores

    tasks = build_geneval(shared_dir / "data/geneval/evaluation_metadata.jsonl")[::2]
    ev = {
        f"{t.task_id}@{s}": inspector.verify(
            gen.generate(Program(prompt=t.prompt, seed=s)), t.constraints
        )
        for t in tasks
        for s in range(2)
    }
    acc = {k: v["accuracy"] for k, v in geneval_scores(tasks, ev)["per_tag"].items()}
    assert acc["single_object"] >= 0.85
    # the default profile (sdxl-like) is calibrated to SDXL's published GenEval scores
    # (.74/.39/.85/.15/.23); wide bands for the sample size
    assert 0.55 <= acc["two_object"] <= 0.9
    assert 0.2 <= acc["counting"] <= 0.6
    assert 0.7 <= acc["colors"] <= 0.97
    assert 0.03 <= acc["position"] <= 0.3
    assert 0.08 <= acc["color_attr"] <= 0.4
