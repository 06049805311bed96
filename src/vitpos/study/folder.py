"""The study folder's records: the settings it holds, the wall time of earlier invocations, the
pretrained encodings' paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import VitposError
from ..files import write_json
from .families import Family
from .plan import StudyPlan

__all__ = ["SETTINGS_FILE", "StudyFolderError", "check_folder", "earlier_wall", "pretrained_path"]

SETTINGS_FILE = "study.json"


class StudyFolderError(VitposError):
    """The output folder holds a study with other settings."""


def _settings(config: StudyPlan) -> dict[str, Any]:
    """What every cell's result depends on; the seed count and the family list may change between runs."""
    out = config.to_dict()
    out.pop("seeds")
    out["families"] = {f["label"]: f for f in out.pop("families")}
    return out


def check_folder(folder: Path, config: StudyPlan) -> None:
    """Record the settings, or check them against the ones already recorded."""
    path = folder / SETTINGS_FILE
    settings = _settings(config)
    if path.is_file():
        saved = _saved_settings(path)
        differ = sorted(k for k in settings if k != "families" and saved.get(k) != settings[k])
        known = saved.get("families", {})
        if not isinstance(known, dict):  # an older detection study's list of labels
            differ, known = [*differ, "families"], {}
        differ += [
            f"family {label}" for label, f in settings["families"].items() if label in known and known[label] != f
        ]
        if differ:
            raise StudyFolderError(
                f"{folder} holds a study with other settings ({', '.join(differ)}); "
                "choose another --out, or pass --fresh to start this folder over"
            )
        settings["families"] = {**known, **settings["families"]}
    write_json(path, settings)


def _saved_settings(path: Path) -> dict[str, Any]:
    """The settings recorded in ``path``, or an error naming it when it is not a study's settings file."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        why = f"{err.msg}, line {err.lineno}" if isinstance(err, json.JSONDecodeError) else "not UTF-8 text"
        raise StudyFolderError(
            f"{path} is not valid JSON ({why}), so the folder holds no study this one can continue; choose another "
            "--out (or, if vitpos study wrote it, pass --fresh to start the folder over)"
        ) from None
    if not isinstance(saved, dict):
        raise StudyFolderError(
            f"{path} holds a JSON {type(saved).__name__}, not a study's settings (an object with the protocol's "
            "fields); choose another --out (or, if vitpos study wrote it, pass --fresh to start the folder over)"
        )
    return saved


def earlier_wall(folder: Path) -> list[float]:
    """Wall seconds of the earlier invocations of the study in ``folder`` (from its ``results.json``)."""
    try:
        results = json.loads((folder / "results.json").read_text())
    except (FileNotFoundError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    wall = results.get("wall_seconds") if isinstance(results, dict) else None
    return [float(s) for s in wall if isinstance(s, (int, float))] if isinstance(wall, list) else []


def pretrained_path(folder: Path, family: Family) -> Path:
    """Where the pretrained encoding of ``family`` lives in the study folder."""
    return folder / "pretrained" / f"{family.label}.safetensors"
