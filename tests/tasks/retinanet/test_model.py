"""RetinaNet's outputs, anchors and parameter counts; the presets of CPVT Table 13's detection half."""

from __future__ import annotations

import pytest
import torch

import vitpos
from vitpos.errors import ConfigError
from vitpos.models.factory import config_from_dict, create_model
from vitpos.tasks import loss_precision
from vitpos.tasks.retinanet import RetinaNet, RetinaNetConfig

from .conftest import square_images, tiny_retinanet

SLOTS = {
    "learned": dict(absolute="learned"),
    "peg": dict(absolute="none", conditional="peg@0"),
    "peg_gap": dict(absolute="none", conditional="peg@0", head="gap"),
}


@pytest.mark.parametrize("slots", SLOTS)
@pytest.mark.parametrize("size", [(64, 64), (48, 80), (32, 16)])
def test_outputs_cover_every_anchor_of_every_level(slots: str, size: tuple[int, int], one_thread) -> None:
    model = create_model(tiny_retinanet(**SLOTS[slots])).eval()
    out = model(torch.randn(2, 3, *size))
    h, w = size
    grids = [(-(-h // s), -(-w // s)) for s in (4, 8, 16, 32, 64)]  # P6, P7: stride-2 convolutions round up
    counts = [gh * gw * 9 for gh, gw in grids]
    assert out["level_anchors"].tolist() == counts
    assert out["pred_logits"].shape == (2, sum(counts), 2) and out["pred_deltas"].shape == (2, sum(counts), 4)
    assert out["anchors"].shape == (sum(counts), 4) and out["image_sizes"].tolist() == [[h, w]] * 2
    first = out["anchors"][: counts[0]].view(*grids[0], 9, 4)
    torch.testing.assert_close(first[1, 2] - first[0, 0], torch.tensor([8.0, 4.0, 8.0, 4.0]).expand(9, 4))
    one = model(torch.randn(1, 3, *size))  # each image's outputs are its own
    assert one["pred_logits"].shape[1] == sum(counts)


@pytest.mark.parametrize("slots", SLOTS)
def test_a_padded_image_is_read_in_its_own_pixels(slots: str, one_thread) -> None:
    """With a padding mask the host sees each image alone (its maps on the valid cells are the image's
    own, float64), ``image_sizes`` are the valid sizes, and detections stay inside each image."""
    torch.manual_seed(0)
    model = create_model(tiny_retinanet(**SLOTS[slots], score_threshold=0.0)).double().eval()
    small, large = torch.randn(1, 3, 32, 48, dtype=torch.float64), torch.randn(1, 3, 64, 64, dtype=torch.float64)
    batch = torch.zeros(2, 3, 64, 64, dtype=torch.float64)
    batch[0, :, :32, :48], batch[1] = small[0], large[0]
    mask = torch.ones(2, 64, 64, dtype=torch.bool)
    mask[0, :32, :48], mask[1] = False, False
    padded = model.backbone.forward_features(batch, mask)[-3:]
    for alone, inside in zip(model.backbone.forward_features(small)[-3:], padded, strict=True):
        h, w = alone.shape[-2:]
        torch.testing.assert_close(inside[:1, :, :h, :w], alone)
    out = model(batch, padding_mask=mask)
    assert out["image_sizes"].tolist() == [[32, 48], [64, 64]]
    found = model.postprocess(out, torch.tensor([[32, 48], [64, 64]]))
    assert bool((found[0].boxes[:, 0::2] <= 48).all()) and bool((found[0].boxes[:, 1::2] <= 32).all())
    original = model.postprocess(out, torch.tensor([[64, 96], [64, 64]]))  # the small image was shrunk 2x
    torch.testing.assert_close(original[0].boxes, found[0].boxes * 2)


def test_the_class_prior_starts_every_anchor_at_one_percent(one_thread) -> None:
    out = create_model(tiny_retinanet()).eval()(torch.randn(1, 3, 32, 32))
    torch.testing.assert_close(out["pred_logits"].sigmoid().mean(), torch.tensor(0.01), atol=2e-3, rtol=0)


def test_loss_reaches_the_position_parameters_and_every_head(one_thread) -> None:
    model = create_model(tiny_retinanet(absolute="learned", conditional="peg@0"))
    images, targets = square_images(2)
    model.criterion()(model(images), targets).backward()
    slots = {n: p.grad for n, p in model.named_parameters() if ".absolute." in n or ".conditional." in n}
    assert len(slots) >= 8 and all(g is not None and g.abs().sum() > 0 for g in slots.values())
    for part in ("neck.p6", "neck.p7", "head.cls_subnet", "head.box_subnet"):
        grads = [p.grad for n, p in model.named_parameters() if n.startswith(part)]
        assert grads and all(g is not None and g.abs().sum() > 0 for g in grads), part


def test_detections_are_scaled_to_the_evaluated_size(one_thread) -> None:
    model = create_model(tiny_retinanet(score_threshold=0.0, max_detections=7)).eval()
    out = model(torch.randn(2, 3, 32, 48))
    at_input, doubled = model.postprocess(out, (32, 48)), model.postprocess(out, (64, 96))
    for a, b in zip(at_input, doubled, strict=True):
        assert len(a.scores) == 7 and bool((a.boxes >= 0).all())
        assert bool((a.boxes[:, 0::2] <= 48).all()) and bool((a.boxes[:, 1::2] <= 32).all())
        torch.testing.assert_close(b.boxes, a.boxes * 2)


PUBLISHED = [
    ("retinanet_pvt_tiny", 23.0),
    ("retinanet_pvt_tiny_peg", 22.6),
    ("retinanet_pvt_tiny_gap", 23.0),
    ("retinanet_pvt_tiny_peg_gap", 22.6),
    ("retinanet_pvt_small", 34.2),
    ("retinanet_pvt_small_peg_gap", 33.8),
    ("retinanet_pvt_medium", 53.9),
    ("retinanet_pvt_medium_peg_gap", 53.6),
]


@pytest.mark.parametrize("name, millions", PUBLISHED)
def test_preset_parameter_counts(name: str, millions: float) -> None:
    """PVT's RetinaNet sizes at COCO's 80 classes (PVT Table 2: 23.0, 34.2, 53.9 M); CPVT Table 13 rounds
    every row to whole millions (23 / 34 / 54): PEG's 0.4M fewer parameters (the tables) round the same."""
    with torch.device("meta"):
        model = create_model(name)
    count = sum(p.numel() for p in model.parameters())
    assert round(count / 1e6, 1) == millions
    assert round(count / 1e6) == {"tiny": 23, "small": 34, "medium": 54}[name.split("_")[2]]


def test_the_host_inside_is_the_classification_preset_without_its_classifier() -> None:
    with torch.device("meta"):
        det, host = create_model("retinanet_pvt_tiny_peg_gap"), create_model("pvt_tiny_peg_gap", num_classes=0)
    assert isinstance(det, RetinaNet) and det.pretrained_host is det.backbone
    inner = {k[len("backbone.") :]: v.shape for k, v in det.state_dict().items() if k.startswith("backbone.")}
    assert inner == {k: v.shape for k, v in host.state_dict().items()}
    assert set(vitpos.list_models("retinanet_*", task="detection")) >= {
        "retinanet_pvt_tiny_peg",
        "retinanet_pvt_medium",
    }


def test_config_round_trips_and_checks_itself() -> None:
    cfg = tiny_retinanet(relu_before_p7=False, box_loss="l1", p6_from="p5")
    again = config_from_dict(cfg.to_dict())
    assert isinstance(again, RetinaNetConfig) and again == cfg and again.task == "detection"
    with pytest.raises(ConfigError, match=r"negative_iou=0\.6 is above positive_iou=0\.5"):
        tiny_retinanet(negative_iou=0.6)
    with pytest.raises(ConfigError, match="last 3 stages"):
        tiny_retinanet(embed_dims=(8, 16), depths=(1, 1), num_heads=(1, 2), mlp_ratios=(2.0, 2.0), sr_ratios=(2, 1))
    with pytest.raises(ConfigError, match="box_loss"):
        tiny_retinanet(box_loss="giou")


def test_the_loss_reads_boxes_in_each_images_own_pixels() -> None:
    """Rows normalised by a padded image's own size (32 x 48 inside 64 x 64) give the loss of the same
    pixel boxes normalised by the full input: the criterion scales by ``image_sizes``, not the input."""
    torch.manual_seed(0)
    model = create_model(tiny_retinanet()).eval()
    with torch.no_grad():
        out = model(torch.randn(1, 3, 64, 64))
    pixels = torch.tensor([[10.0, 6.0, 30.0, 26.0], [24.0, 2.0, 46.0, 20.0]])  # x0, y0, x1, y1 inside 48 x 32

    def rows(h: int, w: int) -> torch.Tensor:
        cx, cy = (pixels[:, 0] + pixels[:, 2]) / 2 / w, (pixels[:, 1] + pixels[:, 3]) / 2 / h
        bw, bh = (pixels[:, 2] - pixels[:, 0]) / w, (pixels[:, 3] - pixels[:, 1]) / h
        return torch.stack([torch.tensor([0.0, 1.0]), cx, cy, bw, bh], dim=-1)[None]

    criterion = model.criterion()
    own = criterion.components({**out, "image_sizes": torch.tensor([[32, 48]])}, rows(32, 48))
    full = criterion.components(out, rows(64, 64))
    for name in ("cls", "box"):
        torch.testing.assert_close(own[name], full[name])
    stretched = criterion.components(out, rows(32, 48))  # the same rows read against the whole input
    assert not torch.allclose(stretched["box"], full["box"])


def test_bf16_autocast_gives_a_finite_loss_and_detections(one_thread) -> None:
    model = create_model(tiny_retinanet(score_threshold=0.0, candidates_per_level=100))
    images, targets = square_images(2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(images)
    assert out["pred_logits"].dtype == torch.bfloat16
    out = loss_precision(out)
    loss = model.criterion()(out, targets)
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.head.parameters())
    found = model.postprocess(out, (64, 64))
    assert all(0 < len(d.scores) <= model.cfg.max_detections for d in found)
    assert all(bool((d.scores[:-1] >= d.scores[1:]).all()) and torch.isfinite(d.boxes).all() for d in found)
