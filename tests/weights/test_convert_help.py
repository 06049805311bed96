"""`vitpos convert --help` lists every released layout that loads."""

import pytest

from vitpos.cli import main
from vitpos.weights.load import LAYOUTS, NATIVE


def test_convert_help_lists_every_released_layout(capsys):
    with pytest.raises(SystemExit) as exit_status:
        main(["convert", "--help"])
    assert exit_status.value.code == 0
    text = capsys.readouterr().out
    released = [layout for layout in LAYOUTS if layout is not NATIVE]
    assert len(released) == 13
    for layout in released:
        assert f"\n  {layout.name:<13}{layout.description}" in text, layout.name
    for family in (
        "Compact Transformers (ViT-Lite, CVT, CCT)",
        "T2T-ViT",
        "CeiT",
        "RoPE-ViT",
        "--pe_joining",
        "state_dict_ema",
    ):
        assert family in text
