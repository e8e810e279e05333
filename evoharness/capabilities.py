"""What a deployed generator honours: the conditioning a program may carry for it.

This module owns the one model every part of the platform uses to talk about a generator's
capabilities: the embedded world's profiles declare them, every generation backend reports
them (``GenerationService.Describe``), the runtime drops conditioning the deployed generator
cannot honour (a ``capability_drop`` trace record), the generation service refuses such a
program (``FAILED_PRECONDITION``), and the proposal checks reject a patch whose effect depends
on an unsupported capability (``unsupported_by_generator``).

Pure: imports nothing outside ``evoharness.program``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evoharness.program import Program

#: Kinds of layout conditioning, weakest first. ``none``: boxes are not honoured at all;
#: ``guidance``: training-free layout guidance (BoxDiff / MultiDiffusion class); ``adapter``: a
#: trained grounding adapter (GLIGEN class); ``native``: layout is part of the model's training.
LayoutKind = Literal["none", "guidance", "adapter", "native"]
_LAYOUT_RANK = {"none": 0, "guidance": 1, "adapter": 2, "native": 3}


class GeneratorCapabilities(BaseModel):
    """The conditioning a generator deployment honours.

    Fields:
        layout: kind of layout conditioning (``LayoutKind``); ``none`` means layout boxes are
            ignored by the model, so a program must not carry them.
        layout_attributes: which per-box attributes are honoured beside the label
            (subset of ``{"color", "text"}``). ``"color"`` covers all the adjectives of the
            box's grounding phrase: its colour and its ``LayoutItem.attributes`` (textures,
            materials, shapes), which a layout-to-image model reads the same way.
        max_references: how many reference images a program may carry (0 = none).
        reference_roles: which reference roles are honoured (e.g. ``subject``, ``style``).
        negative_prompt: whether a classical negative prompt is honoured (FLUX.1-dev, for
            instance, has none: it is distilled without classifier-free guidance).
        max_prompt_tokens: text-encoder context in tokens, start/end included (77 for CLIP,
            512 for T5 in FLUX.1).
        seedable: the same program and seed give the same image.
        resolutions: allowed ``[width, height]`` pairs; empty means any inside the bounds.

    Frozen and hashable: capabilities are part of a deployment's identity.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    layout: LayoutKind = "none"
    layout_attributes: tuple[str, ...] = ()
    max_references: int = Field(default=0, ge=0)
    reference_roles: tuple[str, ...] = ()
    negative_prompt: bool = True
    max_prompt_tokens: int = Field(default=77, ge=1)
    seedable: bool = True
    resolutions: tuple[tuple[int, int], ...] = ()

    def unsupported(self, program: Program) -> list[str]:
        """Names of the capabilities ``program`` needs that this deployment lacks.

        Returns a list of strings from ``{"layout", "layout.color", "layout.text",
        "references", "negative_prompt", "resolution"}``; empty when the program is fully
        honoured. Prompt length is not checked here (a long prompt is truncated by the text
        encoder, which is the generator's behaviour, not a refusal).
        """
        missing: list[str] = []
        if program.layout:
            if self.layout == "none":
                missing.append("layout")
            else:
                if "color" not in self.layout_attributes and any(
                    i.color or i.attributes for i in program.layout
                ):
                    missing.append("layout.color")
                if "text" not in self.layout_attributes and any(i.text for i in program.layout):
                    missing.append("layout.text")
        if program.references and len(program.references) > self.max_references:
            missing.append("references")
        if program.negative_prompt.strip() and not self.negative_prompt:
            missing.append("negative_prompt")
        if self.resolutions:
            size = (program.params.width, program.params.height)
            if size not in {tuple(r) for r in self.resolutions}:
                missing.append("resolution")
        return missing

    def shortfall(self, required: GeneratorCapabilities) -> list[str]:
        """What this deployment lacks of ``required`` (e.g. the generator a harness was
        validated on): names from ``{"layout", "layout.<attribute>", "references",
        "references.<role>", "negative_prompt", "max_prompt_tokens", "seedable",
        "resolution"}``; empty when it honours at least as much. Layout kinds are ordered
        ``none < guidance < adapter < native``; a deployment restricted to fixed
        ``resolutions`` lacks any size ``required`` allows that it does not."""
        out: list[str] = []
        if _LAYOUT_RANK[self.layout] < _LAYOUT_RANK[required.layout]:
            out.append("layout")
        out += [
            f"layout.{a}" for a in required.layout_attributes if a not in self.layout_attributes
        ]
        if self.max_references < required.max_references:
            out.append("references")
        out += [
            f"references.{r}" for r in required.reference_roles if r not in self.reference_roles
        ]
        if required.negative_prompt and not self.negative_prompt:
            out.append("negative_prompt")
        if self.max_prompt_tokens < required.max_prompt_tokens:
            out.append("max_prompt_tokens")
        if required.seedable and not self.seedable:
            out.append("seedable")
        if self.resolutions and (
            not required.resolutions or set(required.resolutions) - set(self.resolutions)
        ):
            out.append("resolution")
        return out

    def honoured(self, program: Program) -> tuple[Program, list[str]]:
        """``(program without what this deployment cannot honour, unsupported())``.

        Layout is removed when layout is ``none`` (else only unsupported per-box attributes);
        references are cut to ``max_references``; an unsupported negative prompt becomes "".
        A resolution outside ``resolutions`` is reported but kept (the size is the request's,
        not conditioning that can be dropped). The runtime sends the first element (recording
        a ``capability_drop``); the proposal checks compare parent and child through it.
        """
        missing = self.unsupported(program)
        if not missing:
            return program, missing
        update: dict[str, object] = {}
        if "layout" in missing:
            update["layout"] = None
        elif program.layout and ("layout.color" in missing or "layout.text" in missing):
            update["layout"] = [
                item.model_copy(
                    update={
                        **({"color": None, "attributes": ()} if "layout.color" in missing else {}),
                        **({"text": None} if "layout.text" in missing else {}),
                    }
                )
                for item in program.layout
            ]
        if "references" in missing:
            update["references"] = (program.references or [])[: self.max_references] or None
        if "negative_prompt" in missing:
            update["negative_prompt"] = ""
        return program.model_copy(update=update), missing


#: Capabilities of a deployment that honours everything the program model can carry (the
#: embedded world before generator profiles existed).
FULL = GeneratorCapabilities(
    layout="adapter",
    layout_attributes=("color", "text"),
    max_references=8,
    reference_roles=("subject", "style"),
)


class UnsupportedConditioning(RuntimeError):
    """A generator refused a program that needs conditioning its deployment does not honour.

    ``missing``: the capability names (``GeneratorCapabilities.unsupported``);
    ``generator_id``: the deployment. The generation service maps it to
    ``FAILED_PRECONDITION``, naming the capabilities.
    """

    def __init__(self, missing: list[str], generator_id: str) -> None:
        self.missing = list(missing)
        self.generator_id = generator_id
        super().__init__(
            f"generator {generator_id} does not honour {', '.join(self.missing)} "
            "(the program needs it; drop it before calling)"
        )
