"""The detection study: iRPE's Table 6 claims on ``synthetic:detect`` with tiny DETRs (``vitpos study --task detect``).

Each family is a ``detr_tiny_*`` preset (a Table 6 row) on images of up to 32 x 32 pixels, each of
its own size and aspect ratio (sides 24 to 32, ``vary``; up to an 8 x 8 encoder grid), padded per
batch with a padding mask as DETR's batches are, small enough to train on a CPU. Every (family,
seed) cell trains with the engine on the same images and steps; its test AP is measured at the
training size and, without fine-tuning, at ``long_size`` (a 16 x 16 grid by default). The
piecewise-against-clip claim (§4.2: the two differ once offsets exceed the buckets) is tested at the
training size, where offsets reach 7 and the clip's beta is 4: the models do not transfer to
``long_size`` (AP near 0 for every family in the default study), where a comparison would be
vacuous; the table reports that AP.
:class:`DetectStudyConfig` is a :class:`~.dense.DenseStudy`: :func:`~.run.run_study` runs its cells
(one JSON each, so an interrupted study continues) and the claims get verdicts from the same
bootstrap test as the main study (:mod:`.verdicts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..config import HostConfig
from ..data.synthetic_detect import SyntheticDetection
from ..models.factory import get_config
from .claims import Claim
from .dense import DenseStudy, gain
from .families import Family

__all__ = ["DETECT_FAMILIES", "DETECT_CLAIMS", "DetectStudyConfig"]

TASK = "detect"
DETECT_FAMILIES = {
    "sine": "detr_tiny_sine",
    "none": "detr_tiny_none",
    "sine_irpe_bias": "detr_tiny_sine_irpe_bias",
    "irpe_ctx": "detr_tiny_irpe_ctx",
    "sine_irpe_ctx": "detr_tiny_sine_irpe_ctx",
    "sine_irpe_ctx_clip": "detr_tiny_sine_irpe_ctx_clip",
}
"""Family label -> preset (iRPE Table 6 rows #1, #2, #3, #4, #6, #5)."""


def _gain(source: str, statement: str, paper: str, better: str, worse: str, bound: float) -> Claim:
    return gain(TASK, source, statement, paper, "AP", better, worse, bound)


DETECT_CLAIMS: tuple[Claim, ...] = (
    _gain("iRPE Table 6 #1 vs #2", "DETR without a position encoding is far worse", "30.4 -> 39.5",
          "sine", "none", 0.0),
    _gain("iRPE Table 6 #1 vs #4", "a relative encoding alone is worse than the absolute one", "38.7 -> 39.5",
          "sine", "irpe_ctx", 0.0),
    _gain("iRPE Table 6 #1 vs #6", "adding a relative encoding to the absolute one does not hurt (it gains)",
          "39.5 -> 40.8", "sine_irpe_ctx", "sine", -1.0),
    _gain("iRPE Table 6 #1 vs #3", "a relative bias added to the absolute encoding does not hurt (it gains)",
          "39.5 -> 40.6", "sine_irpe_bias", "sine", -1.0),
    _gain("iRPE Table 6 #5 vs #6, §4.2", "the piecewise index is at least as good as clipping on long sequences",
          "40.4 -> 40.8", "sine_irpe_ctx", "sine_irpe_ctx_clip", -1.0),
)  # fmt: skip
"""Table 6's conclusions as tests (the paper's AP as "worse -> better" of the quantity): a gap above 0
for "worse"; non-inferiority within 1 AP point for "does not hurt" and "at least as good" (the
paper's gains are 0.4-1.3 points, below what a small synthetic study can resolve)."""


@dataclass(frozen=True)
class DetectStudyConfig(DenseStudy):
    """Every setting of a detection study; a :class:`~.plan.StudyPlan` for :func:`~.run.run_study`."""

    TASK: ClassVar[str] = TASK
    TITLE: ClassVar[str] = "Detection study: iRPE Table 6 on synthetic:detect"
    PRESETS: ClassVar[dict[str, str]] = DETECT_FAMILIES
    CLAIMS: ClassVar[tuple[Claim, ...]] = DETECT_CLAIMS
    STRIDE: ClassVar[int] = 4
    METRIC: ClassVar[str] = "AP"
    COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = (("AP", "AP"), ("AP50", "AP50"), ("AP75", "AP75"))
    runs = "detection"

    objects: int = 3
    min_size: int = 4
    max_size: int = 10

    @classmethod
    def family(cls, label: str) -> Family:
        """The family ``label`` of :data:`DETECT_FAMILIES`: its preset's four slots."""
        return Family(label, get_config(DETECT_FAMILIES[label]).position.to_dict())

    @property
    def model(self) -> HostConfig:
        """The tiny DETR at the study's image size (stride-4 stem: up to an 8 x 8 encoder grid at 32 px);
        each family sets its four slots."""
        return get_config(DETECT_FAMILIES["sine"], img_size=self.img_size)

    def data(self, seed: int) -> SyntheticDetection:
        return SyntheticDetection(
            img_size=self.img_size,
            vary=self.vary,
            objects=self.objects,
            min_size=self.min_size,
            max_size=self.max_size,
            train=self.train_size,
            val=self.val_size,
            test=self.test_size,
            seed=seed,
        )

    def setup(self) -> str:
        return (
            f"Tiny DETRs (width 64, 2 + 2 layers, 8 queries, stride-4 stem) on {self.train_size} images of up to "
            f"{self.img_size} x {self.img_size} px (each side from {self.data(0).smallest[0]} px, padded "
            f"batches) with 1-{self.objects} squares of {self.min_size}-{self.max_size} px, {self.epochs} epochs, "
            f"batch {self.batch_size}, lr {self.lr:g}; {self.seeds} seeds. "
            f"COCO AP (%) on {self.test_size} test images, mean ± sd over seeds."
        )
