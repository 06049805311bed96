"""`vitpos convert`: a released checkpoint becomes a folder that `eval --checkpoint` and `train --init` take."""

import torch
import yaml

import vitpos
from vitpos.cli import main
from vitpos.weights import latest_checkpoint, load_model

from ..weights import layouts
from ..weights.conftest import save_pth

DATA = "--data=synthetic:direction:img=32:train=64:val=32:test=32"


def released_thesis_vit(tmp_path):
    # thesis_vit's shape: width 64, one block, patch 4 on 32x32, two classes
    sd = layouts.timm_vit(layouts.Filler(51), dim=64, depth=1, patch=4, grid=8, classes=2)
    return save_pth({k: v.float() for k, v in sd.items()}, tmp_path / "deit.pth")


def test_convert_then_eval_and_fine_tune(tmp_path, capsys):
    src, dst = released_thesis_vit(tmp_path), tmp_path / "converted"
    assert main(["convert", str(src), str(dst), "--model=thesis_vit"]) == 0
    assert "(timm-vit layout) ->" in capsys.readouterr().out
    direct = vitpos.create_model("thesis_vit", checkpoint=src)
    model, ckpt = load_model(dst)
    assert ckpt.model_config == direct.cfg
    assert all(torch.equal(v, direct.state_dict()[k]) for k, v in model.state_dict().items())
    config = yaml.safe_load((dst / "config.yaml").read_text())
    assert config == {"model": direct.cfg.to_dict(), "train": {"init": str(dst)}}

    again = vitpos.create_model(None, checkpoint=dst)  # the saved config, no preset needed
    assert again.cfg == direct.cfg and torch.equal(again.stages[0].absolute.table, direct.stages[0].absolute.table)

    assert main(["eval", f"--checkpoint={dst}", DATA]) == 0
    assert "| converted |" in capsys.readouterr().out

    run = tmp_path / "run"
    fast = [
        "--epochs=1",
        "--batch-size=32",
        "--lr=0",
        "--min-lr=0",
        "--warmup-epochs=0",
        "--no-progress",
        f"--run-dir={run}",
    ]
    assert main(["train", f"--config={dst / 'config.yaml'}", DATA, *fast]) == 0
    trained, _ = load_model(latest_checkpoint(run))  # lr 0: the run keeps the weights it started from
    assert all(torch.equal(v, direct.state_dict()[k]) for k, v in trained.state_dict().items())


def test_train_init_takes_a_released_file_and_resizes_the_head(tmp_path):
    src = released_thesis_vit(tmp_path)
    run = tmp_path / "run"
    data = "--data=synthetic:direction4:img=32:train=64:val=32:test=32"
    fast = [
        "--epochs=1",
        "--batch-size=32",
        "--lr=0",
        "--min-lr=0",
        "--warmup-epochs=0",
        "--no-progress",
        f"--run-dir={run}",
    ]
    assert main(["train", "--model=thesis_vit", f"--init={src}", data, *fast]) == 0
    trained, _ = load_model(latest_checkpoint(run))
    direct = vitpos.create_model("thesis_vit", checkpoint=src)
    assert trained.head.weight.shape == (4, 64)
    assert torch.equal(trained.stages[0].blocks[0].attn.qkv.weight, direct.stages[0].blocks[0].attn.qkv.weight)


def test_convert_without_a_fitting_preset_asks_for_one(tmp_path, capsys):
    sd = layouts.timm_vit(layouts.Filler(52), dim=24, depth=1, patch=4, grid=4, classes=3)
    assert main(["convert", str(save_pth(sd, tmp_path / "odd.pth")), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "odd.pth (timm-vit layout): no preset fits it, and its shapes give no variant of one; name the model" in err
    assert not (tmp_path / "out").exists()


def test_init_drop_lets_a_released_model_take_another_encoding(tmp_path, capsys):
    src = released_thesis_vit(tmp_path)
    fast = ["--epochs=1", "--batch-size=32", "--lr=0", "--min-lr=0", "--warmup-epochs=0", "--no-progress"]
    base = ["train", "--model=thesis_vit", f"--init={src}", "--relative=irpe:product:ctx:k", DATA, *fast]
    assert main([*base, f"--run-dir={tmp_path / 'strict'}"]) == 2
    assert "does not provide: stages.0.blocks.0.attn.relative.table_k" in capsys.readouterr().err
    assert main([*base, "--init-drop=*.relative.*", f"--run-dir={tmp_path / 'run'}"]) == 0
    trained, _ = load_model(latest_checkpoint(tmp_path / "run"))
    direct = vitpos.create_model("thesis_vit", checkpoint=src)
    assert torch.equal(trained.stages[0].absolute.table, direct.stages[0].absolute.table)
    assert torch.count_nonzero(trained.stages[0].blocks[0].attn.relative.table_k) == 0  # iRPE's zero start


def test_convert_fits_the_position_table_as_resize_says(tmp_path):
    src = released_thesis_vit(tmp_path)  # stored for an 8x8 grid
    tables = {}
    for resize in ("timm", "model"):
        dst = tmp_path / resize
        assert main(["convert", str(src), str(dst), "--model=thesis_vit", "--img-size=48", f"--resize={resize}"]) == 0
        direct = vitpos.create_model("thesis_vit", checkpoint=src, img_size=48, resize=resize)
        tables[resize] = load_model(dst)[0].stages[0].absolute.table
        assert tables[resize].shape == (1, 12 * 12, 64)
        assert torch.equal(tables[resize], direct.stages[0].absolute.table)
    assert not torch.allclose(tables["timm"], tables["model"])


def test_released_cct_converts_and_evaluates_from_the_command_line(tmp_path, capsys):
    # a small CCT in Compact Transformers' layout: width 16, one layer, 16x16 tokens on 32 px, two classes
    sd = layouts.compact(layouts.Filler(52), dim=16, depth=1, classes=2, tokens=256, conv=(3,))
    src, dst = save_pth({k: v.float() for k, v in sd.items()}, tmp_path / "cct.pth"), tmp_path / "cct"
    flags = ["--model=cct_7_3x1", "--embed-dim=16", "--depth=1", "--num-heads=2", "--num-classes=2"]
    assert main(["convert", str(src), str(dst), *flags]) == 0
    assert "(compact layout) ->" in capsys.readouterr().out
    model, _ = load_model(dst)
    assert model.cfg.arch == "compact" and model.cfg.head == "seq"
    assert torch.equal(model.attention_pool.score.weight, sd["classifier.attention_pool.weight"].float())
    assert main(["eval", f"--checkpoint={dst}", DATA]) == 0
    assert "| cct |" in capsys.readouterr().out


def test_convert_says_which_preset_it_picked(tmp_path, capsys):
    src = released_thesis_vit(tmp_path)
    assert main(["convert", str(src), str(tmp_path / "out")]) == 0
    assert f"{src} fits preset thesis_vit (name another with --model)" in capsys.readouterr().out
    assert main(["convert", str(tmp_path / "out"), str(tmp_path / "again")]) == 0  # a vitpos folder: its own config
    assert "fits preset" not in capsys.readouterr().out
