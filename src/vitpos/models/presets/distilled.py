"""DeiT with a distillation token (Touvron et al. 2021, §4; timm's ``deit_*_distilled_*``), and LaPE's.

``deit_tiny_distilled_patch16_224`` / ``deit_small_distilled_patch16_224``: DeiT-Ti / DeiT-S with
a second prefix token after the class token, a row for it in the learned position table and its
own head; at inference the two heads' logits are averaged (5,910,800 and 22,436,432 parameters:
the 5.9M and 22.4M timm lists). Hard distillation from a teacher trains them (``--teacher``).
``*_lape`` are LaPE's Table 1 rows (DeiT-Ti-distill, DeiT-S-distill): a LayerNorm of the position
embedding per layer, 2 D parameters each.
"""

from ...registry import MODELS
from .deit import DEIT_SMALL, DEIT_TINY

for _size, _deit in {"tiny": DEIT_TINY, "small": DEIT_SMALL}.items():
    _distilled = _deit.replace(distilled=True)
    MODELS.add(f"deit_{_size}_distilled_patch16_224", _distilled)
    MODELS.add(f"deit_{_size}_distilled_patch16_224_lape", _distilled.replace(join="lape"))
