"""What `vitpos train` says before its first step, what it names the evaluated split, and errors
caused by a recipe's own settings."""

import json
import shutil

import yaml

from vitpos.cli import main
from vitpos.engine.recipes import blame_recipe

from ..photos import CLASSES, photo_folder
from .test_train_eval import DATA, FAST, MODEL

PREAMBLE_KEYS = ("model      ", "device     ", "data       ", "settings   ", "run        ")


def _train(capsys, *argv):
    assert main(["train", *MODEL, *FAST, *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_the_preamble_precedes_the_first_step_and_is_kept_in_the_run_files(tmp_path, capsys):
    config = tmp_path / "lr.yaml"
    config.write_text(yaml.safe_dump({"train": {"weight_decay": 0.01}}))
    run_dir = tmp_path / "run"
    argv = [f"--data={DATA}", f"--config={config}", f"--run-dir={run_dir}"]
    lines = _train(capsys, *argv)
    assert [line[:11] for line in lines[:5]] == list(PREAMBLE_KEYS) and lines[5].startswith("epoch 1/1")
    model, device, data, settings, folder = lines[:5]
    assert model.startswith("model      thesis_vit (vit host, 16x16 images, 2 outputs): ") and "parameters" in model
    assert device == "device     cpu, float32"
    assert "(classification, 2 classes): train 128 / val 64 / test 64 images; splits as the data set comes" in data
    assert f"recipe none; from config {config}: weight_decay=0.01; from command line: " in settings
    assert "epochs=1" in settings and "batch_size=32" in settings and settings.endswith("every other at its default")
    assert folder == f"run        {run_dir}; a new run from step 0, epochs 1; the final evaluation reads the test split"
    saved = (run_dir / "config.yaml").read_text()
    assert all(f"# {line}\n" in saved for line in lines[:5])
    run = json.loads((run_dir / "summary.json").read_text())["run"]
    assert run["data"]["images"] == {"train": 128, "val": 64, "test": 64} and run["resumed"] is None
    assert run["settings"][f"config {config}"] == {"weight_decay": 0.01} and run["device"] == "cpu"

    # --print-config shows the model section of the run's config.yaml, resolved in full
    assert main(["train", *MODEL, *FAST, *argv, "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed == yaml.safe_load(saved)

    # a resumed run names its resume point
    lines = _train(capsys, *argv, "--epochs=2", "--resume")
    assert lines[4].startswith(f"run        {run_dir}; resuming {run_dir}/checkpoints/")
    assert "at epoch 1, step 4, epochs 2" in lines[4] and "from the run's config.yaml: " in lines[3]


def test_a_flat_folder_says_how_it_was_split(tmp_path, capsys):
    root = photo_folder(tmp_path / "photos", per_class=10)
    for name in CLASSES:  # class folders straight under the root
        shutil.move(root / "train" / name, root / name)
    shutil.rmtree(root / "train"), shutil.rmtree(root / "val")
    lines = _train(capsys, f"--data=folder:{root}", "--batch-size=8", f"--run-dir={tmp_path / 'run'}")
    assert lines[2].endswith(
        "(classification, 4 classes): train 32 / val 4 / test 4 images; "
        "class folders split at random (seed 0): 10% val, 10% test (4 images each), the rest train"
    )


def test_a_folder_without_test_split_names_val_as_evaluated(tmp_path, capsys):
    root = photo_folder(tmp_path / "photos")  # train/ and val/ only
    run_dir = tmp_path / "run"
    lines = _train(capsys, f"--data=folder:{root}", "--batch-size=8", f"--run-dir={run_dir}")
    assert "train 24 / val 8 images" in lines[2] and lines[4].endswith("the final evaluation reads the val split")
    assert lines[-1].startswith(f"run folder {run_dir}: val loss ") and " acc1 " in lines[-1]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["evaluated_split"] == "val" and "val" in summary and "test" not in summary
    assert main(["eval", f"--checkpoint={run_dir}", "--no-progress"]) == 0
    record = json.loads((run_dir / "eval-val.json").read_text())
    assert record["split"] == "val" and record["eval_crop"] == 0.875  # photographs: the crop applies


def test_a_recipe_error_names_the_recipe_and_how_to_turn_its_settings_off(tmp_path, capsys):
    assert main(["train", "--recipe=deit", "--model=thesis_vit", "--run-dir=none"]) == 2
    err = capsys.readouterr().err
    assert (
        "--recipe deit sets what synthetic:direction:square=4 (classification) cannot take: crop_scale=0.08, "
        "hflip=0.5, cutmix=1.0, randaugment=rand-m9-mstd0.5-inc1, random_erasing=0.25 move or hide things within "
        "the image and would change its labels; repeated_aug=3 needs single images, and it draws whole batches" in err
    )
    off = "--crop-scale none --hflip 0 --cutmix 0 --randaugment none --random-erasing 0 --repeated-aug 1"
    assert err.rstrip().endswith(off)
    lines = _train(capsys, "--recipe=deit", *off.split(), f"--data={DATA}", "--run-dir=none")  # the advice works
    assert "recipe deit; from recipe deit: " in lines[3] and "mixup=0.8" in lines[3]


def test_other_errors_from_a_recipe_setting_name_the_recipe():
    err = ValueError("lr_batch 512 does not divide the batch")
    blamed = blame_recipe(err, "deit", {"lr_batch": "recipe deit", "epochs": "command line"})
    assert str(blamed) == (
        "lr_batch 512 does not divide the batch (lr_batch: set by --recipe deit, from DeiT Table 9 (= CPVT Table 10), "
        "iRPE §4.1, LaPE Table 7; a value given on the command line overrides the recipe's)"
    )
    assert blame_recipe(err, "deit", {"lr_batch": "command line"}) is err
