"""The main job: a controlled comparison of position encodings on the red-green tasks, with a report."""

from .cells import Cell, CellStore
from .families import BUILT_IN_FAMILIES, DEFAULT_FAMILIES, PYRAMID_FAMILIES, Family, parse_family
from .protocol import EFFICIENCY_TASKS, TASKS, StudyConfig
from .run import StudyFolderError, run_study

__all__ = [
    "BUILT_IN_FAMILIES",
    "DEFAULT_FAMILIES",
    "PYRAMID_FAMILIES",
    "EFFICIENCY_TASKS",
    "TASKS",
    "Cell",
    "CellStore",
    "Family",
    "StudyConfig",
    "StudyFolderError",
    "parse_family",
    "run_study",
]
