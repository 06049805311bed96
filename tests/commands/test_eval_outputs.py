"""`vitpos eval` writes into the folder it evaluated, one file per evaluation; checkpoints carry their data config."""

import json
import re

import pytest
import torch
import yaml
from PIL import Image

from vitpos.cli import main
from vitpos.deploy import load_deployed
from vitpos.tasks import task_kind
from vitpos.weights import read_saved_model
from vitpos.weights.data_config import IMAGENET_MEAN, DataConfig

from ..photos import photo_folder
from .test_convert import DATA, released_thesis_vit
from .test_train_eval import DATA as RUN_DATA
from .test_train_eval import FAST, MODEL


def test_each_converted_folder_gets_its_own_results_and_evaluations_never_share_a_file(tmp_path, capsys):
    src = released_thesis_vit(tmp_path)
    first, second = tmp_path / "first", tmp_path / "second"
    for dst in (first, second):
        assert main(["convert", str(src), str(dst), "--model=thesis_vit", "--no-progress"]) == 0
    assert main(["eval", f"--checkpoint={first}", DATA, "--no-progress"]) == 0
    assert main(["eval", f"--checkpoint={second}", DATA, "--no-progress", "--split=val"]) == 0
    assert main(["eval", f"--checkpoint={second}", DATA, "--no-progress"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deit.pth", "first", "second"]  # nothing beside them
    assert sorted(p.name for p in first.glob("eval*")) == ["eval-test.json", "eval-test.md"]
    names = sorted(p.name for p in second.glob("eval*"))
    assert names == ["eval-test.json", "eval-test.md", "eval-val.json", "eval-val.md"]
    assert json.loads((second / "eval-val.json").read_text())["split"] == "val"
    assert "on the val split of" in (second / "eval-val.md").read_text()
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(first), str(first), DATA, "--no-progress", "--split=val"]) == 2
    assert f"two checkpoints would write {first / 'eval-val.json'}" in capsys.readouterr().err
    assert not (first / "eval-val.json").exists()


def test_a_converted_file_carries_the_released_preprocessing_at_its_size(tmp_path):
    dst = tmp_path / "converted"
    assert main(["convert", str(released_thesis_vit(tmp_path)), str(dst), "--model=thesis_vit"]) == 0
    config = read_saved_model(dst).data_config
    assert config.input_size == (3, 32, 32) and config.mean == IMAGENET_MEAN
    assert (config.interpolation, config.crop_pct, config.label_names) == ("bicubic", 0.875, ())


def test_a_run_carries_its_data_config_through_conversion(tmp_path):
    run = tmp_path / "run"
    assert main(["train", *MODEL, f"--data={RUN_DATA}", *FAST, "--eval-crop=0.9", f"--run-dir={run}"]) == 0
    config = read_saved_model(run).data_config
    assert config.input_size == (3, 16, 16) and len(config.label_names) == 2
    # eval feeds a synthetic task's images whole, whatever --eval-crop says: so does the data config
    assert (config.crop_mode, config.crop_pct, config.interpolation) == ("squash", 1.0, "bilinear")
    assert DataConfig.from_dict(yaml.safe_load((run / "data_config.yaml").read_text()), "run") == config
    # the data it was trained on, spelled as given to train, is no other data; another seed is
    for spec in (RUN_DATA, RUN_DATA + ":seed=1"):
        assert main(["eval", f"--checkpoint={run}", f"--data={spec}", "--no-progress"]) == 0
    names = sorted(p.name for p in run.glob("eval*.json"))
    assert len(names) == 2 and names[1] == "eval-test.json"
    assert re.fullmatch(r"eval-test-data-[0-9a-f]{8}\.json", names[0]), names
    dst = tmp_path / "c"
    assert main(["convert", str(read_saved_model(run).path), str(dst)]) == 0
    assert read_saved_model(dst).data_config == config
    out = tmp_path / "run.pt2"
    assert main(["export", f"--checkpoint={run}", "--min-size=8", "--max-size=32", str(out), "--no-progress"]) == 0
    deployed = load_deployed(out)
    assert deployed.data_config == config
    photo = Image.new("RGB", (40, 30), (255, 0, 0))  # resized to 16x16 and normalised
    expected = (torch.tensor([1.0, 0.0, 0.0]) - torch.tensor(config.mean)) / torch.tensor(config.std)
    torch.testing.assert_close(config.preprocess(photo)[:, 8, 8], expected)
    assert deployed.predict([photo, photo]).shape == (2, len(config.label_names))


def test_a_data_config_round_trips_and_names_a_bad_field():
    config = DataConfig((1, 8, 12), (0.5,), (0.25,), "bilinear", 1.0, label_names=("a", "b"))
    assert DataConfig.from_dict(json.loads(json.dumps(config.to_dict())), "x") == config
    with pytest.raises(ValueError, match="mean and std need 3 values"):
        DataConfig((3, 8, 8), (0.5,), (0.5,))
    with pytest.raises(ValueError, match="x: the data config lacks the field 'input_size'"):
        DataConfig.from_dict({"mean": [0.5]}, "x")


@pytest.mark.parametrize(
    ("task", "key", "value", "shown"),
    [
        ("classification", "val_acc5", 48.148, "val_acc5 48.1%"),
        ("classification", "acc1", 16.667, "acc1 16.7%"),
        ("classification", "train_loss", 1.41632, "train_loss 1.416"),
        ("regression", "r2", 0.99612, "r2 0.9961"),
        ("detection", "ema_val_AP50", 41.25, "ema_val_AP50 41.2%"),
        ("segmentation", "aacc", 99.61, "aacc 99.6%"),
    ],
)
def test_every_percentage_is_printed_with_its_sign_and_other_metrics_as_numbers(task, key, value, shown):
    assert task_kind(task).format_metric(key, value) == shown


def test_evaluations_with_another_crop_or_sizes_keep_their_own_files_and_a_repeat_asks_for_force(tmp_path, capsys):
    run = tmp_path / "run"
    photos = photo_folder(tmp_path / "photos", per_class=2, held=1)
    assert main(["train", *MODEL, f"--data=folder:{photos}", *FAST, "--batch-size=4", f"--run-dir={run}"]) == 0
    evaluate = ["eval", f"--checkpoint={run}", "--split=val", "--no-progress"]
    for options in ([], ["--eval-crop=0.5"], ["--resolutions=16,24"], ["--eval-crop=0.5", "--resolutions=16x24"]):
        assert main([*evaluate, *options]) == 0
    names = sorted(p.name for p in run.glob("eval-*.json"))
    assert names == ["eval-val-at16,24.json", "eval-val-at16x24-crop0.5.json", "eval-val-crop0.5.json", "eval-val.json"]
    assert json.loads((run / "eval-val-crop0.5.json").read_text())["eval_crop"] == 0.5
    before = (run / "eval-val.json").read_bytes()
    capsys.readouterr()
    assert main(evaluate) == 2
    assert "eval-val.json holds the result of an earlier vitpos eval; pass --force" in capsys.readouterr().err
    assert (run / "eval-val.json").read_bytes() == before
    assert main([*evaluate, "--force"]) == 0


def test_eval_from_another_folder_reads_the_data_the_run_was_trained_on(tmp_path, monkeypatch, capsys):
    """A run records its data's paths absolute: ``photos/`` of another folder is other data, not the run's."""
    (tmp_path / "a").mkdir()
    photo_folder(tmp_path / "a" / "photos", per_class=2, held=1)
    monkeypatch.chdir(tmp_path / "a")
    assert main(["train", *MODEL, "--data=folder:photos", *FAST, "--batch-size=4", "--run-dir=run"]) == 0
    assert read_saved_model(tmp_path / "a" / "run").train_config["data"] == f"folder:{tmp_path / 'a' / 'photos'}"
    (tmp_path / "b").mkdir()
    photo_folder(tmp_path / "b" / "photos", per_class=2, held=3, seed=1)  # the same classes, other photographs
    monkeypatch.chdir(tmp_path / "b")
    assert main(["eval", "--checkpoint=../a/run", "--split=val", "--no-progress"]) == 0
    record = json.loads((tmp_path / "a" / "run" / "eval-val.json").read_text())
    assert record["data"] == f"folder:{tmp_path / 'a' / 'photos'}"
    assert main(["eval", "--checkpoint=../a/run", "--split=val", "--data=folder:photos", "--no-progress"]) == 0
    assert len(list((tmp_path / "a" / "run").glob("eval-val-data-*.json"))) == 1  # the other folder: other data
