"""Study families: built-ins, the text form, availability."""

import pytest
import torch

from vitpos import create_model
from vitpos.analysis.tables import absolute_table
from vitpos.study.families import DEFAULT_FAMILIES, PYRAMID_FAMILIES, Family, FamilyError, parse_family, split_available
from vitpos.study.hosts import study_host
from vitpos.study.protocol import study_model


def test_default_families_are_the_issue_list_and_valid():
    labels = [f.label for f in DEFAULT_FAMILIES]
    assert labels == [
        "none",
        "learned",
        "sincos2d",
        "learnable_sincos",
        "fourier",
        "fourier_pretrained",
        "irpe_product",
        "peg",
        "lape_learned",
    ]
    available, missing = split_available(DEFAULT_FAMILIES)
    assert not missing and len(available) == 9
    for family in available:
        family.validate()
    assert [f.label for f in DEFAULT_FAMILIES if f.pretrained] == ["fourier_pretrained"]
    assert not parse_family("peg").has_table and parse_family("lape_learned").has_table


def test_text_form():
    family = parse_family("swin16: absolute=none relative=swin pretrained")
    assert family == Family("swin16", {"absolute": "none", "relative": "swin"}, pretrained=True)
    assert parse_family("learned") is DEFAULT_FAMILIES[1]
    gap = parse_family("rel: absolute=none relative=swin head=gap")
    assert gap.head == "gap" and gap.model_overrides == {"absolute": "none", "relative": "swin", "head": "gap"}
    assert gap.describe() == "absolute=none, relative=swin, head=gap"
    with pytest.raises(ValueError, match="head must be one of cls, gap, seq"):
        parse_family("rel: relative=swin head=mean")


def _shuffle_patches(images: torch.Tensor, patch: int, order: torch.Tensor) -> torch.Tensor:
    b, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    tiles = images.reshape(b, c, gh, patch, gw, patch).permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, c, patch, patch)
    tiles = tiles[:, order].reshape(b, gh, gw, c, patch, patch)
    return tiles.permute(0, 3, 1, 4, 2, 5).reshape(b, c, h, w)


@pytest.mark.parametrize("head", ["cls", "gap"])
def test_a_relative_family_needs_gap_in_the_one_block_study_model(head):
    """With a class-token head the one-block model's output is blind to where the patches are
    (every class-to-patch pair shares one bucket): the reason the relative family uses GAP."""
    torch.manual_seed(0)
    cfg = study_model().replace(absolute="none", relative="irpe:product:ctx:k", head=head, num_classes=2)
    model = create_model(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))  # the relative tables start at zero
    images = torch.randn(3, 3, *cfg.image_hw)
    shuffled = _shuffle_patches(images, cfg.patch_size, torch.randperm(cfg.grid[0] * cfg.grid[1]))
    with torch.no_grad():
        moved = (model(shuffled) - model(images)).abs().max().item()
    assert (moved < 1e-4) if head == "cls" else (moved > 1e-2)
    assert next(f for f in DEFAULT_FAMILIES if f.slots.get("relative")).head == "gap"


@pytest.mark.parametrize(
    "text,message",
    [
        ("learnt", "unknown family 'learnt'; built-in families: none, learned"),
        ("x: relative", "'relative' must look like slot=spec"),
        ("x: position=learned", "unknown slot\\(s\\) or host option\\(s\\) position; slots: absolute, join"),
        ("a b: absolute=none", "may only use letters"),
    ],
)
def test_bad_families_are_clear_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_family(text)


def test_unregistered_values_are_reported_missing_and_invalid_combinations_rejected():
    available, missing = split_available([Family("t5", {"relative": "t5"}), parse_family("sincos2d")])
    assert [f.label for f in available] == ["sincos2d"] and missing == {"t5": ["relative=t5"]}
    with pytest.raises(FamilyError, match="family 'bad'"):
        parse_family("bad: absolute=none join=unshared").validate()
    with pytest.raises(FamilyError, match=r"relative=t5 names no registered relative encoding; valid: .*irpe"):
        parse_family("t5: relative=t5")  # the text form (the command line) refuses what it cannot run


def test_a_family_that_cannot_be_built_on_the_study_model_is_a_clear_error():
    with pytest.raises(FamilyError, match="family 'wide' cannot be built on the study model"):
        parse_family("wide: conditional=peg@7").check_builds(study_model())  # the study model has one block


def test_a_family_names_a_host_and_its_options():
    family = parse_family("pvt_sin: host=pvt absolute=sincos2d depths=2,1 head=gap")
    assert (family.host, family.slots, family.head, family.options) == (
        "pvt",
        {"absolute": "sincos2d"},
        "gap",
        {"depths": (2, 1)},
    )
    assert family.describe() == "host=pvt, absolute=sincos2d, head=gap, depths=2,1"
    cfg = family.model_config(study_model(), num_classes=3)
    assert (cfg.arch, cfg.depths, cfg.head, cfg.num_classes, cfg.position.absolute) == (
        "pvt",
        (2, 1),
        "gap",
        3,
        "sincos2d",
    )
    assert Family(**family.to_dict()) == family  # through JSON: tuples come back as lists
    assert "host" not in parse_family("learned").to_dict()  # the settings of earlier study folders stay equal


@pytest.mark.parametrize("img_size", [24, 32])
def test_pyramid_hosts_end_on_the_study_models_grid(img_size):
    vit = study_model(img_size)
    for family in PYRAMID_FAMILIES:
        family.check_builds(vit)
        cfg = family.model_config(vit)
        assert cfg.stage_grids(cfg.image_hw)[-1] == vit.grid and cfg.embed_dims[-1] == vit.embed_dim
    assert (
        parse_family("pvt_learned").has_table and not parse_family("swin_relative").has_table
    )  # Swin: no table by default
    assert parse_family("sw: host=swin absolute=learned").has_table


@pytest.mark.parametrize(
    "text,message",
    [
        ("x: host=deit absolute=none", "unknown host 'deit'; study hosts: vit, pvt, swin, cct"),
        (
            "x: host=swin windows=3",
            "unknown slot\\(s\\) or host option\\(s\\) windows.*options of the swin host: .*window_size",
        ),
        ("x: host=pvt absolute=fourier pretrained", "a pretrained encoding is one table"),
    ],
)
def test_bad_host_families_are_clear_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_family(text)
    with pytest.raises(FamilyError, match="family 'w' cannot be built on the study's swin host"):
        parse_family("w: host=swin window_size=5 depths=1,1,1").check_builds(study_model())


@pytest.mark.parametrize("label", ["learned", "sincos2d", "learnable_sincos", "fourier", "fourier_pretrained"])
def test_every_study_table_carries_a_position_signal(label):
    """The cells' encodings differ by a standard deviation of at least 0.05 at initialisation: at 0.01
    (Fourier at its default output scale) the model and its pretraining sat at chance."""
    family = parse_family(label)
    torch.manual_seed(0)
    model = create_model(family.model_config(study_model(), num_classes=2))
    assert absolute_table(model).std(dim=0).mean() > 0.05


def test_fourier_scale_multiplies_the_output():
    torch.manual_seed(0)
    plain = create_model(study_model().replace(absolute="fourier:gamma=2", num_classes=2))
    torch.manual_seed(0)
    scaled = create_model(study_model().replace(absolute="fourier:gamma=2:scale=10", num_classes=2))
    torch.testing.assert_close(absolute_table(scaled), 10 * absolute_table(plain))
    assert absolute_table(plain).std(dim=0).mean() < 0.02  # the faint default the study lifts


def test_the_cct_host_puts_its_tokens_on_the_study_models_grid():
    family = parse_family("cct_lape: host=cct join=lape")
    family.check_builds(study_model())
    for size in (24, 32):
        assert study_host("cct", size).stage_grids((size, size)) == study_model(size).stage_grids((size, size))
    assert study_host("cct").head == "seq" and study_host("cct").arch == "compact"
