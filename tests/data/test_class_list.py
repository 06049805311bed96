"""Class lists as users write them: the final newline optional, blank, repeated and broken names refused by line,
UTF-8 required with the byte named; class folder names that no list could hold refused."""

import os

import pytest

from vitpos.data.class_list import check_folder_name, class_list_text, read_class_list
from vitpos.errors import VitposError


@pytest.mark.parametrize(
    "raw",
    [b"cat\ndog\n", b"cat\ndog", b"cat\r\ndog\r\n", b"\xef\xbb\xbfcat\ndog"],
)
def test_a_list_reads_the_same_however_its_lines_end(tmp_path, raw):
    path = tmp_path / "classes.txt"
    path.write_bytes(raw)
    assert read_class_list(path) == ("cat", "dog")


def test_names_are_kept_as_written(tmp_path):
    names = ("café", "hot dog", "Ünïcode ✓", " padded")
    path = tmp_path / "classes.txt"
    path.write_text(class_list_text(names), encoding="utf-8")
    assert read_class_list(path) == names


@pytest.mark.parametrize(
    "raw,said",
    [
        (b"", r"classes\.txt is empty"),
        (b"\n\n", r"classes\.txt is empty"),
        (b"cat\n\ndog\n", r"line 2 is blank"),
        (b"cat\n  \ndog\n", r"line 2 is blank"),
        (b"cat\ndog\ncat\n", r"line 3 repeats 'cat' \(line 1\)"),
        ("cat\nd\u2028og\n".encode(), r"line 2 \('d\\u2028og'\) holds the line break '\\u2028'"),
        (b"cat\rdog\n", r"line 1 \('cat\\rdog'\) holds the line break '\\r'"),
        (b"cat\ncaf\xe9\n", r"is not UTF-8: byte 7 \(line 2\) is 0xE9"),
        (b"cat\n", r"has 1 class \('cat'\): a classifier needs at least two"),
    ],
)
def test_a_bad_list_is_refused_naming_the_line_or_byte(tmp_path, raw, said):
    path = tmp_path / "classes.txt"
    path.write_bytes(raw)
    with pytest.raises(VitposError, match=said):
        read_class_list(path)


def test_folder_names_no_list_can_hold_are_refused(tmp_path):
    check_folder_name(tmp_path / "café")  # UTF-8: fine
    latin = os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9")
    with pytest.raises(VitposError, match=r"caf\\xe9 has a name that is not UTF-8 \(byte 3 of the name is 0xE9\)"):
        check_folder_name(type(tmp_path)(latin))
    with pytest.raises(VitposError, match=r"'d\\nog' has the line break '\\n'"):
        check_folder_name(tmp_path / "d\nog")
