"""Study families: built-ins, the text form, availability."""

import pytest

from vitpos.study.families import DEFAULT_FAMILIES, Family, parse_family, split_available


def test_default_families_are_the_issue_list_and_valid():
    labels = [f.label for f in DEFAULT_FAMILIES]
    assert labels == ["none", "learned", "sincos2d", "learnable_sincos", "fourier", "fourier_pretrained",
                      "irpe_product", "peg", "lape_learned"]
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


@pytest.mark.parametrize(
    "text,message",
    [
        ("learnt", "unknown family 'learnt'; built-in families: none, learned"),
        ("x: relative", "'relative' must look like slot=spec"),
        ("x: position=learned", "unknown slot\\(s\\) position"),
        ("a b: absolute=none", "may only use letters"),
    ],
)
def test_bad_families_are_clear_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_family(text)


def test_unregistered_values_are_reported_missing_and_invalid_combinations_rejected():
    available, missing = split_available([parse_family("t5: relative=t5"), parse_family("sincos2d")])
    assert [f.label for f in available] == ["sincos2d"] and missing == {"t5": ["relative=t5"]}
    with pytest.raises(ValueError, match="family 'bad'"):
        parse_family("bad: absolute=none join=unshared").validate()
