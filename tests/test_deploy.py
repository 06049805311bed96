"""Deployment at any resolution: exported graphs equal the eager model at sizes they were not traced at.

One exported graph per model is called at three image sizes, non-square ones included, and
compared with the eager model (float32, random non-zero tables everywhere).
"""

import re

import numpy as np
import pytest
import torch

import vitpos
from vitpos.deploy import ExportRange, export_model, export_program, load_deployed
from vitpos.onnx_guard import size_rule
from vitpos.registry import ABSOLUTE, CONDITIONAL, JOIN, RELATIVE

from .conftest import TINY

VIT = TINY | dict(depth=1)
VIT_SIZES = [(32, 32), (16, 40), (48, 24)]  # grids 4x4 (the native one), 2x5, 6x3
VIT_RANGE = ExportRange(16, 64, 8)

VIT_CASES = [
    # every absolute encoding, each with a join or a conditional value
    dict(absolute="learned", join="unshared", conditional="peg@-1", depth=2),
    dict(absolute="sincos1d", join="shared"),
    dict(absolute="sincos2d", join="lape", depth=2),
    dict(absolute="learnable_sincos", conditional="peg@0:dw*2:pad=reflect"),
    dict(absolute="fourier", join="input"),
    dict(absolute="sine", join="detr", depth=2),
    # every relative encoding; iRPE in each bucket method and on each target
    dict(absolute="none", relative="irpe:product:ctx:qkv"),
    dict(absolute="none", relative="irpe:quant:bias:qk"),
    dict(relative="irpe:cross:ctx:q:clip"),
    dict(relative="irpe:euclidean:bias:k:unshared"),
    dict(relative="shaw"),
    dict(relative="xl"),
    dict(relative="huang"),
    dict(relative="sasa"),
    dict(absolute="none", join="lape", relative="swin"),  # LaPE's normalised bias
    dict(relative="rope2d"),
    dict(relative="cpb"),  # Swin V2's continuous bias: its table's width follows the grid
]

PVT = dict(
    arch="pvt",
    img_size=32,
    patch_size=4,
    embed_dims=(8, 16),
    depths=(1, 1),
    num_heads=(1, 2),
    mlp_ratios=(2.0, 2.0),
    sr_ratios=(2, 1),
    num_classes=5,
)
SWIN = dict(
    arch="swin",
    img_size=32,
    patch_size=4,
    embed_dims=(8, 16),
    depths=(2, 2),
    num_heads=(1, 2),
    mlp_ratios=(2.0, 2.0),
    window_size=3,
    num_classes=5,
)
PYRAMID_SIZES = [(32, 32), (16, 24), (56, 40)]  # stage grids 8x8/4x4, 4x6/2x3 (one window), 14x10/7x5
PYRAMID_RANGE = ExportRange(16, 64, 8)


def randomised(model: torch.nn.Module) -> torch.nn.Module:
    """Eval mode, every parameter perturbed: zero-initialised tables (iRPE) must count too."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def check_program(model: torch.nn.Module, span: ExportRange, sizes) -> None:
    graph = export_program(model, span).module()
    for i, size in enumerate(sizes):
        x = torch.randn(1 + i, 3, *size)  # the batch is dynamic too
        with torch.no_grad():
            torch.testing.assert_close(graph(x), model(x), rtol=0, atol=1e-5, msg=f"at {size}")


def check_onnx(model: torch.nn.Module, sizes, path) -> None:
    """Export to ONNX for sides 16..64 and compare the file run in onnxruntime with the eager model."""
    export_model(model, path, fmt="onnx", min_size=16, max_size=64)
    deployed = load_deployed(path)
    for i, size in enumerate(sizes):
        x = torch.randn(1 + i, 3, *size)
        with torch.no_grad():
            torch.testing.assert_close(deployed(x), model(x), rtol=0, atol=1e-4, msg=f"at {size}")


def test_vit_cases_cover_every_registered_value():
    used = {
        slot: {case.get(slot, default).split(":")[0].split("@")[0] for case in VIT_CASES}
        for slot, default in (("absolute", "learned"), ("join", "input"), ("conditional", "none"), ("relative", "none"))
    }
    assert used["absolute"] == set(ABSOLUTE.names())
    assert used["join"] == set(JOIN.names())
    assert used["conditional"] == set(CONDITIONAL.names())
    assert used["relative"] | {"none"} == set(RELATIVE.names())


@pytest.mark.parametrize("case", VIT_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_vit_program_equals_eager_at_every_size(case, one_thread):
    model = randomised(vitpos.create_model("vit_lite_7_4", **VIT | case))
    check_program(model, VIT_RANGE, VIT_SIZES)


@pytest.mark.parametrize(
    "host,case",
    [
        (PVT, dict()),  # PVT's learned table per stage, spatial-reduction attention
        (PVT, dict(absolute="none", conditional="peg@0", head="gap")),
        (SWIN, dict(absolute="none")),  # Swin's relative bias in (shifted, padded) windows
    ],
    ids=["pvt-learned", "pvt-peg", "swin-bias"],
)
def test_pyramid_program_equals_eager_at_every_size(host, case, one_thread):
    model = randomised(vitpos.create_model("pvt_tiny" if host is PVT else "swin_tiny", **host | case))
    check_program(model, PYRAMID_RANGE, PYRAMID_SIZES)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        dict(absolute="sincos2d", relative="irpe:product:ctx:qkv"),
        dict(absolute="learned", join="lape", relative="rope2d"),
    ],
    ids=["irpe", "lape-rope"],
)
def test_swin_program_with_other_slots(case, one_thread):
    """The same property as ``swin-bias`` above, for more slot values in windows."""
    model = randomised(vitpos.create_model("swin_tiny", **SWIN | case))
    check_program(model, PYRAMID_RANGE, PYRAMID_SIZES)


def test_saved_program_checks_sizes_like_the_eager_model(tmp_path, one_thread):
    model = randomised(vitpos.create_model("vit_lite_7_4", **VIT))
    meta = export_model(model, tmp_path / "vit.pt2", fmt="pt2", min_size=16, max_size=48)
    assert meta == tmp_path / "vit.pt2.yaml" and "patch_size: 8" in meta.read_text()
    deployed = load_deployed(tmp_path / "vit.pt2")
    x = torch.randn(2, 3, 24, 48)
    with torch.no_grad():
        torch.testing.assert_close(deployed(x), model(x), rtol=0, atol=1e-5)
    with pytest.raises(ValueError) as eager:
        model(torch.randn(1, 3, 30, 32))
    with pytest.raises(ValueError) as exported:
        deployed(torch.randn(1, 3, 30, 32))
    assert str(exported.value) == str(eager.value)
    with pytest.raises(ValueError, match=r"outside the exported range: both sides must lie in 16\.\.48"):
        deployed(torch.randn(1, 3, 56, 32))


def test_export_range_is_checked_before_tracing():
    model = vitpos.create_model("vit_lite_7_4", **VIT)
    with pytest.raises(ValueError, match="multiples of the model's stride 8"):
        export_model(model, "unused.pt2", fmt="pt2", min_size=20, max_size=64)
    pvt = vitpos.create_model("pvt_tiny", **PVT | dict(sr_ratios=(4, 1)))
    with pytest.raises(
        ValueError, match="cannot run at --min-size 8: spatial reduction by 4 needs a grid of at least 4x4"
    ):
        export_program(pvt, ExportRange(8, 64, 8))  # stage 0 has a 2x2 grid at 8x8


def test_lape_normalised_window_bias_needs_whole_windows():
    """LaPE's bias normalisation would see the padding of a window larger than the stage grid."""
    model = vitpos.create_model("swin_tiny", **SWIN | dict(absolute="none", join="lape", relative="swin"))
    with pytest.raises(
        ValueError,
        match=r"at --min-size 16 that holds for stage 1 \(grid 2x2, 3x3 windows\); use --min-size 24 or more",
    ):
        export_program(model, PYRAMID_RANGE)


@pytest.mark.slow
def test_lape_normalised_window_bias_exports_from_whole_windows(one_thread):
    model = randomised(vitpos.create_model("swin_tiny", **SWIN | dict(absolute="none", join="lape", relative="swin")))
    check_program(model, ExportRange(24, 64, 8), [(24, 24), (48, 24), (40, 64)])


def test_swin_v2_program_equals_eager_and_its_window_scaled_bias_needs_whole_windows(one_thread):
    # cosine attention, post-norm blocks, the release's -100 region mask, cpb scaled by the window
    model = randomised(vitpos.create_model("swinv2_tiny_window8_256", **SWIN))
    with pytest.raises(ValueError, match=r"relative 'cpb' without pretrained=.*use --min-size 24 or more"):
        export_program(model, PYRAMID_RANGE)
    check_program(model, ExportRange(24, 64, 8), [(24, 24), (48, 24), (40, 64)])


def test_onnx_file_in_onnxruntime_equals_eager(tmp_path, one_thread, capfd):
    pytest.importorskip("onnxscript")
    pytest.importorskip("onnxruntime")
    case = dict(
        absolute="learned", conditional="peg@0", relative="irpe:quant:ctx:qkv"
    )  # bicubic resize, convs, buckets
    check_onnx(randomised(vitpos.create_model("vit_lite_7_4", **VIT | case)), VIT_SIZES, tmp_path / "vit.onnx")
    out, err = capfd.readouterr()  # the exporter's progress lines and torchvision warnings are kept off
    assert "[torch.onnx]" not in out and "torchvision" not in err
    # the graph itself refuses a size outside the range or off the stride, in any runtime
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(str(tmp_path / "vit.onnx"), providers=["CPUExecutionProvider"])
    rule = size_rule(16, 64, load_deployed(tmp_path / "vit.onnx").span.stride)
    for size in [(30, 32), (16, 72), (8, 16)]:
        with pytest.raises(Exception, match=re.escape(rule)):
            session.run(None, {"images": np.zeros((1, 3, *size), np.float32)})


ONNX_CASES = [("vit_lite_7_4", VIT | case) for case in VIT_CASES] + [
    ("pvt_tiny", PVT),
    ("pvt_tiny", PVT | dict(absolute="none", conditional="peg@0", head="gap")),
    ("swin_tiny", SWIN | dict(absolute="none")),
    ("swin_tiny", SWIN | dict(absolute="sincos2d", relative="irpe:product:ctx:qkv")),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,config",
    ONNX_CASES,
    ids=lambda v: (
        v
        if isinstance(v, str)
        else ",".join(f"{k}={x}" for k, x in v.items() if k in ("absolute", "join", "conditional", "relative"))
    ),
)
def test_every_value_as_onnx_in_onnxruntime(name, config, tmp_path, one_thread):
    """The ONNX property of the fast test above for every case of the program tests."""
    pytest.importorskip("onnxscript")
    pytest.importorskip("onnxruntime")
    sizes = VIT_SIZES if name == "vit_lite_7_4" else PYRAMID_SIZES
    check_onnx(randomised(vitpos.create_model(name, **config)), sizes, tmp_path / "m.onnx")


def test_compiled_dynamic_model_does_not_recompile_per_size(one_thread):
    """One graph for every size. Duck sizing is off: with it, a square first input makes dynamo
    assume H == W, and the first non-square size compiles once more (then no more)."""
    import torch.fx.experimental._config as fx_config
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()  # counts every compilation in this process otherwise
    model = randomised(vitpos.create_model("vit_lite_7_4", **VIT, relative="irpe:quant:ctx:k"))
    counter = CompileCounter()
    compiled = torch.compile(model, backend=counter, dynamic=True)
    with fx_config.patch(use_duck_shape=False), torch.no_grad():
        for size in [(32, 32), (16, 40), (48, 24), (64, 16)]:
            x = torch.randn(2, 3, *size)
            torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=1e-5)
    assert counter.frame_count == 1
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1


def test_command_writes_the_program_and_its_config(tmp_path, capsys, one_thread):
    from vitpos.cli import main

    out = tmp_path / "lite.pt2"
    args = [
        "export",
        "--model",
        "vit_lite_7_4",
        "--depth",
        "1",
        "--img-size",
        "16",
        "--min-size",
        "8",
        "--max-size",
        "32",
    ]
    assert main([*args, str(out)]) == 0
    assert "image sides 8..32" in capsys.readouterr().out
    deployed = load_deployed(out)
    assert deployed(torch.randn(2, 3, 24, 8)).shape == (2, 10)
    written = out.read_bytes()
    assert main([*args, "--max-size", "16", str(out)]) == 2  # an existing OUT is kept without --force
    assert f"{out} holds the result of an earlier vitpos export; pass --force to replace it" in capsys.readouterr().err
    assert out.read_bytes() == written
    assert main([*args, "--max-size", "16", "--force", str(out)]) == 0
    assert "max_size: 16" in (tmp_path / "lite.pt2.yaml").read_text()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".vitpos-manifest.jsonl", "lite.pt2", "lite.pt2.yaml"]  # no temporary file left
    assert (
        main(["export", "--model", "swin_tiny_lape", "--min-size", "64", "--max-size", "1024", str(tmp_path / "s.pt2")])
        == 2
    )
    assert "use --min-size 224 or more" in capsys.readouterr().err
