"""`vitpos train --recipe NAME`: the papers' values, command-line overrides, --print-config."""

import dataclasses

import pytest
import yaml

from vitpos.cli import main
from vitpos.config import ViTConfig
from vitpos.engine import TrainConfig
from vitpos.engine.recipes import RECIPES, get_recipe


def _printed(capsys, argv):
    assert main(["train", *argv, "--print-config"]) == 0
    out = capsys.readouterr().out
    comment, _, body = out.partition("\n")
    return comment, yaml.safe_load(body)


@pytest.mark.parametrize("name", list(RECIPES))
def test_every_recipe_is_a_valid_config_with_a_source(name):
    recipe = get_recipe(name)
    cfg = TrainConfig.from_dict(dict(recipe.train))
    assert recipe.source and set(recipe.model) <= {f.name for f in dataclasses.fields(ViTConfig)}
    assert cfg.min_lr <= cfg.peak_lr


def test_recipes_give_the_papers_learning_rates():
    deit, swin = (TrainConfig.from_dict(dict(get_recipe(n).train)) for n in ("deit", "swin"))
    assert deit.peak_lr == pytest.approx(1e-3)  # iRPE §4.1: DeiT's recipe is 1e-3 at batch 1024
    assert deit.replace(batch_size=2048).peak_lr == pytest.approx(2e-3)  # CPVT §4.1: 5e-4 x 2048 / 512
    assert swin.peak_lr == pytest.approx(1e-3) and swin.replace(batch_size=512).peak_lr == pytest.approx(5e-4)
    assert (deit.repeated_aug, swin.repeated_aug, deit.randaugment) == (3, 1, "rand-m9-mstd0.5-inc1")
    assert get_recipe("swin").model["drop_path_rate"] == 0.2 and get_recipe("deit").model["drop_path_rate"] == 0.1


def test_print_config_shows_the_resolved_settings_and_round_trips(capsys, tmp_path):
    argv = ["--recipe=deit", "--model=deit_small_patch16_224", "--batch-size=256", "--mixup=0.5"]
    comment, printed = _printed(capsys, argv)
    assert comment == "# recipe: deit; peak learning rate after warm-up: 0.00025"
    train = printed["train"]
    assert (train["batch_size"], train["mixup"], train["cutmix"], train["lr"]) == (256, 0.5, 1.0, 5e-4)
    model = printed["model"]  # resolved in full, as the run's config.yaml holds it
    assert (model["arch"], model["embed_dim"], model["depth"], model["drop_path_rate"]) == ("vit", 384, 12, 0.1)
    saved = tmp_path / "deit.yaml"
    saved.write_text(yaml.safe_dump(printed))
    assert _printed(capsys, [f"--config={saved}"]) == (
        "# recipe: none; peak learning rate after warm-up: 0.00025",
        printed,
    )
    _, over = _printed(capsys, ["--recipe=deit", "--model=deit_small_patch16_224", "--drop-path-rate=0.3"])
    assert over["model"]["drop_path_rate"] == 0.3  # the command line wins over the recipe


def test_unknown_recipe_lists_the_valid_ones(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--recipe=vit", "--print-config"])
    assert "deit" in capsys.readouterr().err


def test_a_bad_randaugment_spec_is_refused_when_the_config_is_built(capsys):
    assert main(["train", "--recipe=deit", "--randaugment=rand-x9", "--print-config"]) == 2
    assert "TrainConfig.randaugment: cannot read RandAugment spec 'rand-x9' at 'x9'" in capsys.readouterr().err
