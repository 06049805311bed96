"""Study settings: validation, the thesis protocol, the list of cells."""

import pytest

from vitpos.study.families import parse_family
from vitpos.study.protocol import StudyConfig


def test_default_and_full():
    default, full = StudyConfig(), StudyConfig.full()
    assert default.model.depth == 1  # the thesis's one-block ViT
    assert (full.seeds, full.train_size, full.val_size, full.test_size) == (10, 5000, 1000, 1000)
    assert full.probe_folds == 10 and StudyConfig.full(seeds=2).seeds == 2


def test_cells_are_seed_major_and_complete():
    config = StudyConfig(
        families=(parse_family("none"), parse_family("sincos2d")), seeds=2, efficiency_sizes=(100, 300)
    )
    cells = config.cells()
    assert len(cells) == 2 * (2 * 4 + 2 * 2) and len(set(cells)) == len(cells)  # only sincos2d gets curves
    assert {c.family for c in cells if c.train_size == 100} == {"sincos2d"}
    assert (
        len(
            StudyConfig(
                families=config.families, seeds=2, efficiency_sizes=(100, 300), efficiency_families=None
            ).cells()
        )
        == 2 * 2 * 8
    )
    assert {c.seed for c in cells[: len(cells) // 2]} == {0}
    assert {c.train_size for c in cells if c.task == "absolute"} == {1000}
    assert config.train_sizes == (100, 300, 1000)


def test_smaller_training_sets_get_the_same_steps():
    config = StudyConfig(epochs=12, train_size=1000, efficiency_sizes=(100, 250))
    assert config.epochs_for(1000) == 12 and config.epochs_for(250) == 48 and config.epochs_for(100) == 120
    assert StudyConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "overrides,message",
    [
        (dict(seeds=0), "seeds must be at least 1"),
        (dict(efficiency_sizes=(1000,)), "efficiency sizes must lie between"),
        (dict(efficiency_sizes=(10,)), "efficiency sizes must lie between batch_size=32"),
        (dict(resolutions=(30,)), "not multiples of the stride of the study model \\(4 pixels\\)"),
        (dict(families=()), "at least one family"),
        (dict(families=(parse_family("peg"), parse_family("peg"))), "labels must be unique"),
    ],
)
def test_bad_settings(overrides, message):
    with pytest.raises(ValueError, match=message):
        StudyConfig(**overrides)
