"""Generator profiles of the embedded world: loading and its errors, capabilities and refusals,
common random numbers, imperfect layout, side effects and the deterministic cost model."""

from __future__ import annotations

import collections

import pytest

from evoharness.capabilities import UnsupportedConditioning
from evoharness.program import LayoutItem, Program
from evoharness.sim import SimGenerator
from evoharness.sim.cost import generator_seconds
from evoharness.sim.profiles import (
    DEFAULT_PROFILE,
    PROFILE_DIR,
    ProfileError,
    load_profile,
    profile_names,
)

SEEDS = range(40)


@pytest.fixture(scope="module")
def gens() -> dict[str, SimGenerator]:
    return {n: SimGenerator(load_profile(n)) for n in profile_names()}


def test_shipped_profiles_and_capabilities(gens: dict[str, SimGenerator]) -> None:
    assert set(gens) == {"sd15-like", "sdxl-like", "flux-like"} and DEFAULT_PROFILE == "sdxl-like"
    for name, g in gens.items():
        assert g.generator_id.startswith(f"sim/{name}@") and len(g.generator_id.split("@")[1]) == 12
        assert g.capabilities == g.params.capabilities
    assert SimGenerator().generator_id == gens["sdxl-like"].generator_id
    assert gens["sd15-like"].capabilities.layout == "adapter"
    assert gens["sdxl-like"].capabilities.layout == "guidance"
    flux = gens["flux-like"].capabilities
    assert flux.layout == "none" and not flux.negative_prompt and flux.max_prompt_tokens == 512
    # a path loads the same profile as its name; the id changes with any number
    path = PROFILE_DIR / "sd15-like.yaml"
    assert load_profile(str(path)) == load_profile("sd15-like")
    changed = load_profile("sd15-like").model_copy(update={"miss_base": 0.2})
    assert changed.generator_id != gens["sd15-like"].generator_id


def _write(tmp_path, text: str):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


def test_profile_errors_name_file_line_and_field(tmp_path) -> None:
    good = (PROFILE_DIR / "sdxl-like.yaml").read_text()
    path = _write(tmp_path, good.replace("miss_base: 0.01", "miss_base: 1.5"))
    with pytest.raises(
        ProfileError, match=r"bad\.yaml:\d+: field miss_base: .*less than or equal to 1"
    ):
        load_profile(path)
    path = _write(tmp_path, good + "mis_base: 0.1\n")
    with pytest.raises(ProfileError, match=r"bad\.yaml:\d+: field mis_base: unknown field"):
        load_profile(path)
    path = _write(tmp_path, good.replace("  layout: guidance\n", "  layout: gligen\n"))
    with pytest.raises(ProfileError, match=r"bad\.yaml:\d+: field capabilities\.layout"):
        load_profile(path)
    path = _write(
        tmp_path, "\n".join(ln for ln in good.splitlines() if not ln.startswith("color_drift"))
    )
    with pytest.raises(ProfileError, match=r"bad\.yaml: missing required field\(s\): color_drift"):
        load_profile(path)
    with pytest.raises(ProfileError, match="no such profile"):
        load_profile("sd3-like")
    with pytest.raises(ProfileError, match="invalid YAML"):
        load_profile(_write(tmp_path, "a: [1,\n"))


def test_unsupported_conditioning_is_refused(gens: dict[str, SimGenerator]) -> None:
    flux = gens["flux-like"]
    layout = [LayoutItem(label="cat", box=(0.1, 0.1, 0.4, 0.4))]
    with pytest.raises(UnsupportedConditioning, match="does not honour layout"):
        flux.generate(Program(prompt="a cat", layout=layout))
    with pytest.raises(UnsupportedConditioning, match="negative_prompt") as err:
        flux.generate(Program(prompt="a cat", negative_prompt="dog"))
    assert err.value.missing == ["negative_prompt"]
    assert flux.generate(Program(prompt="a cat")).png  # plain prompts are fine
    gens["sd15-like"].generate(Program(prompt="a cat", layout=layout))


def test_common_random_numbers(gens: dict[str, SimGenerator]) -> None:
    g = gens["sdxl-like"]
    # an unrelated negative term draws nothing new: same image, byte for byte
    p = Program(prompt="a photo of a red car and a blue dog", seed=3)
    assert g.generate(p).png == g.generate(p.model_copy(update={"negative_prompt": "zebra"})).png
    # splitting the clause changes only the colour leak (inside one clause → weaker, across
    # clauses): presence, counts and places are the parent's on every seed, and where the
    # colours agree the two images are the same bytes
    same = differ = 0
    for s in SEEDS:
        pa = g.generate(Program(prompt="a photo of a red car and a blue dog", seed=s))
        pb = g.generate(Program(prompt="a photo of a red car. a blue dog", seed=s))
        a, b = pa.manifest, pb.manifest
        assert a["missed"] == b["missed"]
        assert [(o["class"], o["box"]) for o in a["objects"]] == [
            (o["class"], o["box"]) for o in b["objects"]
        ]
        if [o["color"] for o in a["objects"]] == [o["color"] for o in b["objects"]]:
            assert pa.png == pb.png
            same += 1
        else:
            differ += 1
    assert same > 5 and differ > 5  # only the colours changed, on some seeds


def test_draws_do_not_depend_on_the_parameter_digest(gens: dict[str, SimGenerator]) -> None:
    """Retuning one rate re-draws nothing else (draws keyed by profile name and seed, not the
    generator id), while the generator id — and so every execution key — still changes."""
    base = gens["sd15-like"]
    # a cost number: a new id, the same pixels on every seed
    cost = SimGenerator(base.params.model_copy(update={"cost_seconds_per_step": 0.07}))
    assert cost.generator_id != base.generator_id
    for s in range(4):
        p = Program(prompt="a photo of a red car and a blue dog", seed=s)
        a, b = base.generate(p), cost.generate(p)
        assert a.png == b.png and a.generator_id != b.generator_id
    # a higher drift rate only turns kept colours into drifted ones (never the reverse), and
    # leaves every other decision (presence, places) as it was
    drift = SimGenerator(base.params.model_copy(update={"color_drift": 0.6}))
    moved = 0
    for s in SEEDS:
        p = Program(prompt="a photo of a green bench", seed=s)
        a, b = base.generate(p).manifest, drift.generate(p).manifest
        assert a["missed"] == b["missed"]
        assert [o["box"] for o in a["objects"]] == [o["box"] for o in b["objects"]]
        ca, cb = [o["color"] for o in a["objects"]], [o["color"] for o in b["objects"]]
        if ca != cb:
            assert ca == ["green"]
            moved += 1
        elif ca != ["green"] and a["objects"]:
            assert cb == ca  # already drifted under the lower rate: the same drift
    assert moved >= 5


def test_layout_is_imperfect_and_falls_with_box_count(gens: dict[str, SimGenerator]) -> None:
    g = gens["sd15-like"]

    def in_box_rate(n: int) -> float:
        boxes = [(0.02 + 0.16 * i, 0.35, 0.16 + 0.16 * i, 0.65) for i in range(n)]
        hits = total = 0
        for s in SEEDS:
            layout = [LayoutItem(label="cup", box=b) for b in boxes]
            m = g.generate(Program(prompt="cups", seed=s, layout=layout)).manifest
            for b in boxes:
                total += 1
                hits += any(
                    o["source"] == "layout"
                    and b[0] <= (o["box"][0] + o["box"][2]) / 2 <= b[2]
                    and b[1] <= (o["box"][1] + o["box"][3]) / 2 <= b[3]
                    for o in m["objects"]
                )
        return hits / total

    two, six = in_box_rate(2), in_box_rate(6)
    assert 0.6 < two < 1.0 and six < two - 0.1
    m = g.generate(
        Program(prompt="a cat", seed=1, layout=[LayoutItem(label="cat", box=(0.2, 0.2, 0.6, 0.6))])
    ).manifest
    assert all(o["pasted"] for o in m["objects"] if o["source"] == "layout")


def test_negative_prompt_is_partial_and_global(gens: dict[str, SimGenerator]) -> None:
    g = gens["sdxl-like"]

    def dog_rate(prompt: str, negative: str) -> float:
        return sum(
            collections.Counter(
                o["class"]
                for o in g.generate(
                    Program(prompt=prompt, negative_prompt=negative, seed=s)
                ).manifest["objects"]
            )["dog"]
            > 0
            for s in SEEDS
        ) / len(SEEDS)

    assert 0.0 < dog_rate("a bench with no dog", "dog") < dog_rate("a bench with no dog", "")
    # global: a prompt that asks for a dog loses it too
    assert dog_rate("a photo of a dog", "dog") < 0.5 < dog_rate("a photo of a dog", "")


def test_guidance_above_best_raises_text_errors(gens: dict[str, SimGenerator]) -> None:
    g = gens["sdxl-like"]

    def wrong(guidance: float) -> int:
        return sum(
            g.generate(
                Program(
                    prompt='a sign that says "OPEN LATE"',
                    seed=s,
                    params={"guidance_scale": guidance},
                )
            ).manifest["texts"][0]["text"]
            != "OPEN LATE"
            for s in SEEDS
        )

    assert wrong(7.0) < wrong(15.0)


def test_cost_model_is_deterministic_and_priced(gens: dict[str, SimGenerator]) -> None:
    p = load_profile("sd15-like")
    base = Program(prompt="a cat", seed=0)
    fixed = p.cost_fixed_seconds
    s30 = generator_seconds(p, base)
    s60 = generator_seconds(
        p, base.model_copy(update={"params": base.params.model_copy(update={"steps": 60})})
    )
    assert s60 - fixed == pytest.approx(2 * (s30 - fixed))  # linear in steps
    with_layout = base.model_copy(
        update={"layout": [LayoutItem(label="cat", box=(0.1, 0.1, 0.5, 0.5))]}
    )
    assert generator_seconds(p, with_layout) > 2 * s30  # GLIGEN-class adapters cost ≈ 3× a step
    big = base.model_copy(
        update={"params": base.params.model_copy(update={"width": 1024, "height": 1024})}
    )
    assert generator_seconds(p, big) - fixed == pytest.approx(4 * (s30 - fixed))
    img = gens["sd15-like"].generate(base)
    assert (
        img.seconds
        == s30
        == gens["sd15-like"].generate(base.model_copy(update={"seed": 9})).seconds
    )
    assert generator_seconds(load_profile("flux-like"), base) > generator_seconds(p, base)


def test_world_version_is_part_of_the_generator_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulator code change that alters images for unchanged parameters bumps WORLD_VERSION,
    and with it every generator id, so no execution cached under the old behaviour is reused."""
    import evoharness.sim.params as sim_params

    params = load_profile(DEFAULT_PROFILE)
    before = params.generator_id
    monkeypatch.setattr(sim_params, "WORLD_VERSION", sim_params.WORLD_VERSION + 1)
    assert params.generator_id != before and params.generator_id.startswith("sim/sdxl-like@")
