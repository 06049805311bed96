"""The segmentation study: CPVT Table 13's Semantic FPN claims on ``synthetic:segment_absolute``
(``vitpos study --task segment``).

Each family is one of Table 13's PVT-tiny rows (learned tables, + PEG, + GAP, + PEG + GAP) or the
same host with no encoding, on a tiny PVT with a small Semantic FPN (:data:`TINY_HOST`). Images are
of up to 32 x 32 pixels, each of its own size and aspect ratio (``vary``), padded per batch with a
padding mask; the classes are a square's colour and the image half it lies in, so position decides
them. Every (family, seed) cell trains on the same images and steps; test mIoU is measured at the
training size (the claims) and, without fine-tuning, on images drawn around ``long_size``
(reported). CPVT's "no encoding" comparison is its Table 2 (DeiT-tiny on ImageNet), tested here on
Table 13's host. :class:`SegmentStudyConfig` is a :class:`~.dense.DenseStudy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..config import HostConfig
from ..data.synthetic_segment import SEGMENT_TASKS, SyntheticSegmentation
from ..models.factory import get_config
from .claims import Claim
from .dense import DenseStudy, gain
from .families import Family

__all__ = ["SEGMENT_FAMILIES", "SEGMENT_CLAIMS", "SegmentStudyConfig", "TINY_HOST"]

TASK = "segment"
SEGMENT_FAMILIES = {
    "learned": "pvt_tiny_fpn",
    "peg": "pvt_tiny_peg_fpn",
    "gap": "pvt_tiny_gap_fpn",
    "peg_gap": "pvt_tiny_peg_gap_fpn",
    "none": "pvt_tiny_gap_fpn",
}
"""Family label -> preset (CPVT Table 13's PVT-tiny rows; ``none`` also drops the tables)."""
NO_ENCODING = {"none": {"absolute": "none"}}

TINY_HOST = dict(
    embed_dims=(16, 32, 64, 128), num_heads=(1, 2, 4, 8), mlp_ratios=(4.0, 4.0, 4.0, 4.0),
    fpn_dim=64, head_dim=32, norm_groups=8,
)  # fmt: skip
"""PVT-tiny's depths and spatial reductions at a sixteenth of its widths, with a small neck and head
(0.94M parameters, the README's small Table 13)."""


def _gain(source: str, statement: str, paper: str, better: str, worse: str, bound: float) -> Claim:
    return gain(TASK, source, statement, paper, "mIoU", better, worse, bound)


SEGMENT_CLAIMS: tuple[Claim, ...] = (
    _gain("CPVT Table 13, PVT-tiny vs +PEG", "PEG instead of the learned tables gains mIoU", "35.7 -> 38.0",
          "peg", "learned", 0.0),
    _gain("CPVT Table 13, +GAP vs +PEG+GAP", "with GAP, PEG instead of the learned tables gains mIoU", "36.0 -> 38.8",
          "peg_gap", "gap", 0.0),
    _gain("CPVT Table 13, PVT-tiny vs +PEG+GAP", "PEG with GAP beats PVT-tiny's learned tables (+3.1)", "35.7 -> 38.8",
          "peg_gap", "learned", 0.0),
    _gain("CPVT Table 13, +PEG vs +PEG+GAP", "GAP on top of PEG does not hurt (it gains)", "38.0 -> 38.8",
          "peg_gap", "peg", -1.0),
    _gain("CPVT Table 2 (DeiT-tiny), on Table 13's host", "no position encoding is worse than learned tables",
          "68.2 -> 72.2", "gap", "none", 0.0),
    _gain("CPVT Table 2 (DeiT-tiny), on Table 13's host", "no position encoding is worse than PEG",
          "68.2 -> 72.4", "peg_gap", "none", 0.0),
)  # fmt: skip
"""Table 13's segmentation conclusions as tests: a gain above 0 where the paper's is 2.3-3.1 points;
non-inferiority within 1 mIoU point for GAP on top of PEG (+0.8 in the paper, below what a small
synthetic study can resolve). Table 13 has no row without an encoding: that claim is Table 2's
(ImageNet top-1 of DeiT-tiny: no encoding 68.2, learned 72.2, PEG 72.4), whose numbers the
figures show as the paper's."""


@dataclass(frozen=True)
class SegmentStudyConfig(DenseStudy):
    """Every setting of a segmentation study; a :class:`~.plan.StudyPlan` for :func:`~.run.run_study`."""

    TASK: ClassVar[str] = TASK
    TITLE: ClassVar[str] = "Segmentation study: CPVT Table 13 on synthetic:segment_absolute"
    PRESETS: ClassVar[dict[str, str]] = SEGMENT_FAMILIES
    OVERRIDES: ClassVar[dict[str, dict[str, str]]] = NO_ENCODING
    CLAIMS: ClassVar[tuple[Claim, ...]] = SEGMENT_CLAIMS
    STRIDE: ClassVar[int] = 32
    METRIC: ClassVar[str] = "mIoU"
    COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = (("mIoU", "miou"), ("aAcc", "aacc"), ("mAcc", "macc"))
    runs = "segmentation"

    seeds: int = 5
    train_size: int = 1500
    test_size: int = 300
    epochs: int = 10
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 0.05
    grad_clip: float = 1.0
    square_size: int = 8
    """Side of the red and the green square (pixels; images are drawn on its lattice)."""
    segment_task: str = "segment_absolute"
    """``segment_absolute`` (the class depends on the image half: position decides) or ``segment``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.segment_task not in SEGMENT_TASKS:
            raise ValueError(f"segment_task must be one of {', '.join(SEGMENT_TASKS)}, got {self.segment_task!r}")

    @classmethod
    def family(cls, label: str) -> Family:
        """The family ``label`` of :data:`SEGMENT_FAMILIES`: its preset's slots and head."""
        cfg = get_config(SEGMENT_FAMILIES[label])
        return Family(label, {**cfg.position.to_dict(), **NO_ENCODING.get(label, {})}, head=cfg.head)

    @property
    def model(self) -> HostConfig:
        """The tiny PVT-FPN (:data:`TINY_HOST`) at the study's image size; each family sets its slots and head."""
        classes = len(self.data(0).info.classes)
        return get_config(SEGMENT_FAMILIES["learned"], img_size=self.img_size, num_classes=classes, **TINY_HOST)

    def data(self, seed: int) -> SyntheticSegmentation:
        return SyntheticSegmentation(
            task=self.segment_task,
            img_size=self.img_size,
            square_size=self.square_size,
            vary=self.vary,
            train=self.train_size,
            val=self.val_size,
            test=self.test_size,
            seed=seed,
        )

    def setup(self) -> str:
        heights, widths = self.data(0).sides
        return (
            f"Semantic FPNs on a tiny PVT (widths 16-32-64-128, PVT-tiny's depths and spatial reductions, "
            f"64-channel neck, 32-channel head) on {self.train_size} images of up to {self.img_size} x "
            f"{self.img_size} px (heights {', '.join(map(str, heights))}, widths {', '.join(map(str, widths))}; "
            f"padded batches) with a red and a green {self.square_size}-px square, labelled by "
            f"`{self.segment_task}`; {self.epochs} epochs, batch {self.batch_size}, lr {self.lr:g}; "
            f"{self.seeds} seeds. Test mIoU (%) on {self.test_size} images, mean ± sd over seeds."
        )
