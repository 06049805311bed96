"""The study-step bench compares like with like: its variants train the same model on the same batch."""

import pytest
import torch

from bench.study_step import model_step, stack_step, variants
from vitpos.study.families import parse_family
from vitpos.study.protocol import study_model

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("family", ["learned", "irpe_product"])
def test_the_study_step_equals_the_single_model_step(family):
    """The stack of one (the study's trainer) and the module call take the same three steps."""
    model_cfg = parse_family(family).model_config(study_model(24), num_classes=2)
    before, now = model_step(model_cfg, 8), stack_step(model_cfg, 8)
    for _ in range(3):
        torch.testing.assert_close(now(), before(), rtol=1e-5, atol=1e-6)


def test_every_variant_counts_its_images():
    model_cfg = parse_family("none").model_config(study_model(24), num_classes=2)
    images = {name: n for name, (_, n) in variants(model_cfg, 4).items()}
    assert images["before: one model, eager"] == 4 and images["batch 16"] == 16
    assert images["stacked ensemble of 5 (vmap)"] == 20
