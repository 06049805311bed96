"""``log="tensorboard"``: every epoch's numbers go to TensorBoard, or a clear error without the package."""

import sys
import types
from typing import ClassVar

import pytest

from vitpos.engine import board, train
from vitpos.engine.config import TrainConfig
from vitpos.errors import ConfigError

from .conftest import tiny_request


class FakeWriter:
    """Records what a SummaryWriter would write."""

    made: ClassVar[list["FakeWriter"]] = []

    def __init__(self, folder: str) -> None:
        self.folder, self.scalars, self.closed = folder, [], False
        FakeWriter.made.append(self)

    def add_scalar(self, key, value, global_step):
        self.scalars.append((key, value, global_step))

    def close(self):
        self.closed = True


def test_without_tensorboard_the_option_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(board, "tensorboard_missing", lambda: True)
    monkeypatch.setattr("vitpos.engine.config.tensorboard_missing", lambda: True)
    with pytest.raises(ConfigError, match="needs the tensorboard package: pip install tensorboard"):
        TrainConfig(log="tensorboard")
    with pytest.raises(ConfigError, match="csv, tensorboard"):
        TrainConfig(log="wandb")


def test_every_epoch_goes_to_tensorboard_at_its_step(monkeypatch, tmp_path):
    monkeypatch.setattr("vitpos.engine.config.tensorboard_missing", lambda: False)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=FakeWriter))
    FakeWriter.made.clear()
    result = train(*tiny_request(n=64, epochs=2, log="tensorboard", run_dir=str(tmp_path / "run")).resolve())
    assert [w.folder for w in FakeWriter.made] == [str(tmp_path / "run" / "tensorboard")] * 2
    assert all(w.closed for w in FakeWriter.made)
    for writer, row in zip(FakeWriter.made, result.history, strict=True):
        logged = {key: (value, step) for key, value, step in writer.scalars}
        assert logged["train_loss"] == (row["train_loss"], row["step"]) and logged["val_acc1"][0] == row["val_acc1"]
        assert "step" not in logged
