"""The embedded world reacts to every lever a harness fault can move (issue 29), and each
effect is nil at the profiles' default parameters: guidance collapse below the floor, small
objects lost below ``steps_min``, palette / style words, training-free layout guidance bound
to the prompt's tokens, the adherence multiplier on layout boxes. Counts over seeded draws of
the real simulator (manifests; no image is inspected)."""

from __future__ import annotations

from typing import Any

from evoharness.program import Program
from evoharness.sim import SimGenerator
from evoharness.sim.profiles import load_profile
from evoharness.sim.reader import palette_of

SEEDS = range(24)


def _manifests(profile: str, prompt: str, **kw: Any) -> list[dict[str, Any]]:
    gen = SimGenerator(load_profile(profile))
    params = {"steps": 30, "guidance_scale": 7.5, "width": 256, "height": 256}
    params.update(kw.pop("params", {}))
    out = []
    for seed in SEEDS:
        prog = Program.model_validate({"prompt": prompt, "seed": seed, "params": params, **kw})
        out.append(gen.generate(prog).manifest)
    return out


def _colour_share(ms: list[dict[str, Any]], cls: str, colour: str) -> float:
    objs = [o for m in ms for o in m["objects"] if o["class"] == cls]
    return sum(o["color"] == colour for o in objs) / max(1, len(objs))


def _drawn(ms: list[dict[str, Any]], cls: str) -> int:
    return sum(sum(o["class"] == cls for o in m["objects"]) for m in ms)


def test_palette_words_compete_with_the_prompts_colours() -> None:
    plain = _manifests("sdxl-like", "a photo of a red car")
    bw = _manifests("sdxl-like", "a photo of a red car, black and white photograph, monochrome")
    assert _colour_share(plain, "car", "red") >= 0.7
    assert _colour_share(bw, "car", "red") <= 0.4
    # an object's own "black and white" is its colour, not a palette
    assert palette_of("a black and white cat") == ()
    assert palette_of("a dog in shades of blue") == ("blue",)
    # past the token limit a style word is not read
    assert palette_of("a dog " + "very " * 80 + "monochrome", 77) == ()


def test_too_few_steps_lose_small_objects_and_default_steps_change_nothing() -> None:
    prompt = "a photo of ten apples"
    few = _manifests("sdxl-like", prompt, params={"steps": 6})
    ok = _manifests("sdxl-like", prompt, params={"steps": 30})
    assert _drawn(few, "apple") < 0.8 * _drawn(ok, "apple")
    # at or above steps_min the steps leave the drawing alone (figures stay put)
    same = _manifests("sdxl-like", prompt, params={"steps": 25})
    assert [m["objects"] for m in same] == [m["objects"] for m in ok]


def test_guidance_far_below_its_range_collapses_adherence_only_below_the_floor() -> None:
    flux = load_profile("flux-like")
    assert flux.adherence(1.5, 30) > flux.adherence(3.0, 30) + 0.4
    sdxl = load_profile("sdxl-like")
    # the baseline harness's guidance 5.0 is above the floor: unchanged formula
    assert sdxl.guidance_floor <= 5.0
    assert sdxl.adherence(5.0, 30) == 1.0 + sdxl.guidance_low * (1 - 5.0 / sdxl.guidance_best)


def test_layout_guidance_needs_the_objects_token_in_the_read_prompt() -> None:
    box = [{"label": "dog", "box": [0.1, 0.1, 0.5, 0.5]}]
    named = _manifests("sdxl-like", "a photo of a dog", layout=box)
    unnamed = _manifests("sdxl-like", "a photo", layout=box)
    assert _drawn(named, "dog") >= 18
    assert _drawn(unnamed, "dog") <= 6
    # a GLIGEN-class adapter has its own grounding tokens
    assert _drawn(_manifests("sd15-like", "a photo", layout=box), "dog") >= 15


def test_low_guidance_weakens_layout_boxes_too() -> None:
    box = [
        {"label": "dog", "box": [0.05, 0.05, 0.3, 0.3]},
        {"label": "cat", "box": [0.6, 0.6, 0.9, 0.9]},
    ]
    prompt = "a photo of a dog and a cat"
    good = _manifests("sd15-like", prompt, layout=box)
    low = _manifests("sd15-like", prompt, layout=box, params={"guidance_scale": 1.5})

    def in_box(ms: list[dict[str, Any]]) -> int:
        return sum(
            1
            for m in ms
            for o in m["objects"]
            if o["source"] == "layout" and o["class"] == "dog" and o["box"][2] <= 0.32
        )

    assert in_box(low) < in_box(good)
