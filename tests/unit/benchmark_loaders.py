"""Re-implementations of each benchmark's own loader, for the export round-trip tests
(``tests/unit/test_export_eval.py``): they read a folder the way the benchmark's scoring code
does, with its layout and field names, and return what that code would score. They are
copies of the loading half only (no model, no scoring).

- GenEval: djghosh13/geneval, ``evaluation/evaluate_images.py``, ``main`` and
  ``evaluate_image``: prompt folders are the sub-folders whose name ``isdigit()``; each holds
  ``metadata.jsonl`` read with ``json.load`` (one object), and images
  ``samples/<name>`` kept when a file matching ``\\d+\\.png``; ``evaluate`` reads
  ``metadata['tag']``, ``metadata['prompt']``, ``metadata['include']`` (each with
  ``class`` and ``count``, ``color`` / ``position`` optional) and ``metadata.get('exclude')``.
- GenEval 2: facebookresearch/GenEval2, ``README.md`` ("Benchmark Structure", "Image
  Generation", "Evaluation": ``evaluation.py --benchmark_data geneval2_data.jsonl
  --image_filepath_data your_image_paths.json``): a JSON object prompt → image file path,
  and benchmark rows with ``prompt``, ``atom_count``, ``vqa_list`` ([question, answer]
  pairs) and ``skills``.
- T2I-CompBench: Karine-Huang/T2I-CompBench, ``BLIPvqa_eval/BLIP_vqa.py``,
  ``Create_annotation_for_BLIP`` and ``main``: images under ``<out_dir>/samples/``, sorted
  by ``int(name.split("_")[-1].split(".")[0])``; the question's prompt is
  ``name.split("_")[0]``; ``sample_num = len(os.listdir(samples))``.
- WISE: PKU-YuanGroup/WISE, ``gpt_eval.py``, ``load_prompts`` and ``main``: ``{item[
  "prompt_id"]: item}`` from the ``--json_path`` JSON array; the image of a prompt is
  ``os.path.join(image_dir, f"{prompt_id}.png")`` (a prompt without one is skipped with a
  warning); ``evaluate_image`` reads ``Prompt``, ``Explanation`` and ``Subcategory``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any


def load_geneval(imagedir: str) -> list[tuple[dict[str, Any], str]]:
    """(metadata, image path) per image, as GenEval's ``main`` walks ``imagedir``."""
    out = []
    for subfolder in os.listdir(imagedir):
        folderpath = os.path.join(imagedir, subfolder)
        if not os.path.isdir(folderpath) or not subfolder.isdigit():
            continue
        with open(os.path.join(folderpath, "metadata.jsonl")) as fp:
            metadata = json.load(fp)
        for imagename in os.listdir(os.path.join(folderpath, "samples")):
            imagepath = os.path.join(folderpath, "samples", imagename)
            if not os.path.isfile(imagepath) or not re.match(r"\d+\.png", imagename):
                continue
            # the fields evaluate_image / evaluate read
            _ = (metadata["tag"], metadata["prompt"])
            for req in metadata.get("include", []):
                _ = (req["class"], req["count"])
            for req in metadata.get("exclude", []):
                _ = (req["class"], req["count"])
            out.append((metadata, imagepath))
    return out


def load_geneval2(
    benchmark_data: str, image_filepath_data: str
) -> list[tuple[dict[str, Any], str]]:
    """(benchmark row, image path) per prompt that has an image, as GenEval 2's evaluation
    pairs its benchmark data with the prompt → path mapping."""
    with open(image_filepath_data) as fp:
        paths = json.load(fp)
    out = []
    with open(benchmark_data) as fp:
        for line in fp:
            row = json.loads(line)
            _ = (row["atom_count"], row["skills"])
            for question, answer in row["vqa_list"]:
                assert isinstance(question, str) and isinstance(answer, str)
            if row["prompt"] in paths:
                out.append((row, paths[row["prompt"]]))
    return out


def load_t2icompbench(out_dir: str) -> list[dict[str, Any]]:
    """The annotations ``Create_annotation_for_BLIP`` builds for ``<out_dir>/samples/``:
    ``image``, ``question_id`` and the prompt the question is drawn from."""
    image_folder = f"{out_dir}/samples/"
    sample_num = len(os.listdir(os.path.join(out_dir, "samples")))
    file_names = os.listdir(image_folder)
    file_names.sort(key=lambda x: int(x.split("_")[-1].split(".")[0]))
    annotations = []
    for cnt, file_name in enumerate(file_names):
        annotations.append(
            {
                "image": image_folder + file_name,
                "question_id": cnt,
                "prompt": file_name.split("_")[0],
            }
        )
    assert len(annotations) == sample_num
    return annotations


def load_wise(json_path: str, image_dir: str) -> list[tuple[dict[str, Any], str]]:
    """(prompt data, image path) per prompt with an image, as WISE's ``main`` builds its
    tasks (prompts without an image are skipped there with a warning)."""
    with open(json_path) as f:
        data = json.load(f)
    prompts = {item["prompt_id"]: item for item in data}
    out = []
    for prompt_id, prompt_data in prompts.items():
        image_path = os.path.join(image_dir, f"{prompt_id}.png")
        if not os.path.exists(image_path):
            continue
        _ = (prompt_data["Prompt"], prompt_data["Explanation"], prompt_data["Subcategory"])
        out.append((prompt_data, image_path))
    return out
