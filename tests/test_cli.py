"""The command line: entry points and error reporting."""

import subprocess
import sys

from vitpos.cli import main


def test_models_lists_presets_with_counts(capsys):
    assert main(["models", "deit_*"]) == 0
    out = capsys.readouterr().out
    assert "deit_tiny_patch16_224" in out and "5,717,416" in out
    assert "vit_lite_7_4" not in out


def test_unknown_pattern_is_a_clear_error(capsys):
    assert main(["models", "nothing*"]) == 2
    assert "no model matches 'nothing*'" in capsys.readouterr().err


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "vitpos", "models", "vit_lite*"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "vit_lite_7_4" in proc.stdout
