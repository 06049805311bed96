"""Detection on a COCO-format folder of mixed image sizes: padded batches, AP in each image's original pixels."""

import json

import pytest
import torch

from vitpos.data.catalog import open_data
from vitpos.data.coco import decode_image
from vitpos.data.dense_transforms import DenseRecipe, DenseSample
from vitpos.data.folders import IMAGENET_MEAN, IMAGENET_STD
from vitpos.data.objects import ObjectTargets
from vitpos.data.padded import collate_padded, model_inputs
from vitpos.data.transforms import normalize, to_float
from vitpos.engine import RunRequest
from vitpos.engine.evaluate import evaluate
from vitpos.engine.train import train
from vitpos.tasks.detection import DetectionTask, SetCriterion, postprocess
from vitpos.tasks.detection.coco_eval import coco_metrics

from .conftest import SIZES


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny detectors run faster on one thread where cores are shared."""


class ColourOracle(torch.nn.Module):
    """Finds the red and the green square in each image's unpadded region and reports their boxes
    relative to that region, as a detector should: query c holds class c's square (or "no object")."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def criterion(self):
        return SetCriterion(2)

    def forward(self, x, padding_mask=None):
        b, _, hp, wp = x.shape
        mask = torch.zeros(b, hp, wp, dtype=torch.bool) if padding_mask is None else padding_mask
        logits = torch.full((b, 2, 3), -20.0)
        logits[..., -1] = 0.0
        boxes = torch.full((b, 2, 4), 0.5)
        for i in range(b):
            h, w = int((~mask[i, :, 0]).sum()), int((~mask[i, 0, :]).sum())
            for c in range(2):  # normalised red (channel 0) or green (channel 1) is > 0 only on its square
                ys, xs = (x[i, c, :h, :w] > 0).nonzero(as_tuple=True)
                if len(ys):
                    x0, y0, x1, y1 = xs.min().item(), ys.min().item(), xs.max().item() + 1, ys.max().item() + 1
                    boxes[i, c] = torch.tensor([(x0 + x1) / 2 / w, (y0 + y1) / 2 / h, (x1 - x0) / w, (y1 - y0) / h])
                    logits[i, c, c], logits[i, c, -1] = 20.0, -20.0
        return {"pred_logits": logits, "pred_boxes": boxes}


def test_an_oracle_on_padded_batches_of_mixed_sizes_has_ap_100_in_original_pixels(mixed):
    val = open_data(f"coco:{mixed}").val
    # shorter side 32: no image is resampled, the batch of six is padded to 48 x 52 (mixed aspect ratios)
    images, padded = val.at_size(32)[torch.arange(6)]
    assert images.shape[-2:] == (48, 52) and padded.valid_sizes.tolist() == [list(s) for s in SIZES]
    metrics = evaluate(ColourOracle(), val.at_size(32), batch_size=6)
    assert metrics["AP"] == pytest.approx(100.0) and metrics["AP75"] == pytest.approx(100.0)
    # at twice the size every image is resampled; the boxes come back to the original pixels
    doubled = evaluate(ColourOracle(), val.at_size(64), batch_size=4)
    assert doubled["AP50"] == pytest.approx(100.0) and doubled["AP"] > 95.0


def reference(model, root, eval_size: int) -> tuple[list, list, list]:
    """Targets, detections and sizes of ``model`` run on each val image alone (DETR's evaluation resize,
    padded to the stride), its boxes scaled to the image's original size; targets from the annotation file."""
    data = json.loads((root / "annotations" / "instances_val2017.json").read_text())
    label = {3: 0, 18: 1}
    targets, detections, sizes = [], [], []
    recipe = DenseRecipe.scaled(eval_size)
    for meta in data["images"]:
        h, w = meta["height"], meta["width"]
        anns = [a for a in data["annotations"] if a["image_id"] == meta["id"]]
        boxes = torch.tensor([[x + bw / 2, y + bh / 2, bw, bh] for x, y, bw, bh in (a["bbox"] for a in anns)])
        labels = torch.tensor([label[a["category_id"]] for a in anns])
        targets.append(ObjectTargets(labels, boxes / torch.tensor([w, h, w, h])))
        alone = DenseSample(decode_image(root / "val2017" / meta["file_name"]), torch.zeros(0), torch.zeros(0, 4))
        image, padded = collate_padded([recipe.evaluation(alone)], [(h, w)], stride=4)
        x = normalize(to_float(image), IMAGENET_MEAN, IMAGENET_STD).masked_fill(padded.padding_mask[:, None], 0)
        with torch.no_grad():
            detections += postprocess(model(x, padding_mask=padded.padding_mask), torch.tensor([[h, w]]))
        sizes.append((h, w))
    return targets, detections, sizes


def test_a_detector_trained_on_mixed_sizes_reports_ap_on_original_sizes(mixed):
    options = {"data": f"coco:{mixed}", "epochs": 2, "batch_size": 4, "lr": 1e-3, "warmup_epochs": 0,
               "progress": False, "device": "cpu"}  # fmt: skip
    model_cfg, train_cfg, data = RunRequest("detr_tiny_sine", {"img_size": 32}, options).resolve()
    model_cfg = model_cfg.replace(stem_widths=(8, 16), embed_dim=32, enc_depth=1, dec_depth=1, num_queries=4)
    result = train(model_cfg, train_cfg, data)
    assert {"train_loss", "val_loss", "val_AP", "val_AP50", "val_AP75", "val_APs"} <= set(result.history[-1])
    # the engine's evaluation, one image a batch, keeps exactly what the model predicts for each image
    # run alone, in that image's original pixels, against the annotation file's boxes
    model, val = result.model, data.val.at_size(32).padded_to(4)
    task = DetectionTask(data.info, model)
    metrics = task.metrics("cpu", image_hw=(32, 32))
    for i in range(len(val)):
        images, padded = val[torch.tensor([i])]
        x, kwargs = model_inputs(normalize(to_float(images), IMAGENET_MEAN, IMAGENET_STD), padded)
        with torch.no_grad():
            metrics.add_predictions(model(x, **kwargs), padded)
    targets, detections, sizes = reference(model, mixed, 32)
    assert [hw for _, _, hw in metrics.images] == sizes == [tuple(s) for s in SIZES]
    for (target, found, _), true, expected in zip(metrics.images, targets, detections, strict=True):
        torch.testing.assert_close(target.boxes, true.boxes)
        assert torch.equal(target.labels, true.labels)
        torch.testing.assert_close(found.boxes, expected.boxes)
        torch.testing.assert_close(found.scores, expected.scores)
    assert found.boxes.max() > 2  # boxes in pixels of the image, not normalised
    engine = evaluate(model, val, batch_size=1)
    assert engine["AP"] == pytest.approx(coco_metrics(targets, detections, sizes, 2)["AP"])
