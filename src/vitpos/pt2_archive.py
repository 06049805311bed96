"""Reading a ``.pt2`` program without running code from it.

``torch.export.load`` unpickles parts of an archive (pickled weights, sample inputs after a
failed restricted load), parses symbolic shapes with ``sympy`` (which evaluates them), turns
guard strings into Python code and resolves node targets by attribute lookup on ``torch``. A
file written by ``torch.export.save`` for a vitpos model needs none of that freedom, so before
torch sees the file it is held to what such an export contains: the members torch writes and
no others; weights and constants stored as raw tensors (never pickles); sample inputs that load
with ``torch.load(weights_only=True)``; graph nodes that call ATen operators, integer arithmetic
or an autocast/grad-mode region around a nested graph (itself checked); shape expressions and
guards made of sizes, integers and arithmetic only.
"""

from __future__ import annotations

import io
import json
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from .errors import CheckpointError

__all__ = ["load_program"]

_MEMBERS = re.compile(
    r"(archive_format|archive_version|byteorder|\.data/version|\.data/serialization_id|models/model\.json"
    r"|data/weights/model_weights_config\.json|data/weights/weight_\d+"
    r"|data/constants/model_constants_config\.json|data/constants/tensor_\d+|data/sample_inputs/model\.pt)"
)
_PAYLOADS = {"weights": re.compile(r"weight_\d+"), "constants": re.compile(r"tensor_\d+")}
_ATEN = re.compile(r"torch\.ops\.aten\.\w+\.\w+")
_ARITHMETIC = frozenset(
    f"_operator.{name}" for name in ("add", "sub", "mul", "floordiv", "truediv", "mod", "neg", "pow", "getitem")
)
_REGIONS = frozenset(f"torch.ops.higher_order.{name}" for name in ("wrap_with_autocast", "wrap_with_set_grad_enabled"))
"""Higher-order operators that run a nested graph (itself checked) under autocast or a grad mode."""
_OPERATOR_KEYS = frozenset({"target", "as_operator"})
_EXPRESSION_KEYS = frozenset({"expr_str"})
_REFUSED_KEYS = frozenset({"as_custom_obj", "as_opaque_obj"})
_SYMPY_NAMES = frozenset(
    {"Add", "Mul", "Pow", "Integer", "Rational", "Symbol", "Mod", "PythonMod", "FloorDiv", "CeilToInt"}
    | {"FloorToInt", "Max", "Min", "positive", "integer", "True", "False"}
)
_EXPRESSION = re.compile(r"[\w\s(),=*+\-/%<>']*")
_SYMBOL = re.compile(r"'s\d+'")
_SIZE = re.compile(r"L\['\w+'\]\.size\(\)\[\d+\]")
_GUARD = re.compile(r"[\d\s()%*+\-/<>=!]*")
_MAX_BYTES = 2**33


def load_program(path: Path) -> torch.export.ExportedProgram:
    """The program in ``path``, after checking the archive holds nothing that would run code on loading."""
    data = path.read_bytes()  # checked and loaded from the same bytes
    members = _check_members(path, data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for kind, pattern in _PAYLOADS.items():
            name = f"data/{kind}/model_{kind}_config.json"
            if name in members:
                _check_payloads(path, name, _json(path, archive, members[name]), pattern)
        program = _json(path, archive, members["models/model.json"])
        _check_program(path, program)
        if "data/sample_inputs/model.pt" in members:
            _check_tensors_only(path, archive.read(members["data/sample_inputs/model.pt"]))
    try:
        return torch.export.load(io.BytesIO(data))
    except Exception as err:  # torch's own words for a file that passed the checks but does not load
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(f"{path}: torch.export could not load it ({message}); export it again") from None


def _refuse(path: Path, what: str) -> CheckpointError:
    return CheckpointError(
        f"{path}: refused: {what}; a file from `vitpos export` never holds this, so it was not loaded "
        "(export the model again from its checkpoint)"
    )


def _check_members(path: Path, data: bytes) -> dict[str, str]:
    """The archive's members by their name under the one root folder; raise on anything else."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = archive.namelist()
            unpacked = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile:
        raise CheckpointError(
            f"{path} is not a .pt2 archive (not a zip file): it is truncated or corrupt; export the model again"
        ) from None
    if unpacked > _MAX_BYTES:
        raise _refuse(path, f"its members unpack to {unpacked} bytes")
    roots = {name.split("/", 1)[0] for name in names}
    if len(roots) != 1 or len(set(names)) != len(names):
        raise _refuse(path, f"members under {len(roots)} top folders or repeated names")
    members = {name.split("/", 1)[1] if "/" in name else "": name for name in names}
    unexpected = sorted(full for name, full in members.items() if not _MEMBERS.fullmatch(name))
    if unexpected:
        raise _refuse(path, f"unexpected member(s) {', '.join(repr(n[:80]) for n in unexpected[:5])}")
    if "models/model.json" not in members:
        raise _refuse(path, "no models/model.json (the program)")
    return members


def _json(path: Path, archive: zipfile.ZipFile, name: str) -> Any:
    try:
        return json.loads(archive.read(name))
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(f"{path}: member {name} is not valid JSON; export the model again") from None


def _check_payloads(path: Path, name: str, config: Any, pattern: re.Pattern[str]) -> None:
    entries = config.get("config") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        raise _refuse(path, f"{name} is not a mapping of payloads")
    for fqn, entry in entries.items():
        if not isinstance(entry, dict) or entry.get("use_pickle") is not False:
            raise _refuse(path, f"{name}: {str(fqn)[:80]!r} is stored as a pickle")
        if not pattern.fullmatch(str(entry.get("path_name"))):
            raise _refuse(path, f"{name}: {str(fqn)[:80]!r} is not a raw tensor")


def _check_program(path: Path, node: Any) -> None:
    """Walk the program's JSON: operators, shape expressions, guards and refused argument kinds."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            for key, value in item.items():
                if key in _REFUSED_KEYS:
                    raise _refuse(path, f"the program holds a {key!r} argument")
                if key in _OPERATOR_KEYS and isinstance(value, str) and not _is_operator(value):
                    raise _refuse(path, f"the program calls {value[:80]!r}, not an ATen operator")
                if key in _EXPRESSION_KEYS and isinstance(value, str):
                    _check_expression(path, value)
                if key == "range_constraints" and isinstance(value, dict):
                    for expression in value:
                        _check_expression(path, expression)
                if key == "guards_code" and isinstance(value, list):
                    for guard in value:
                        _check_guard(path, guard)
                    continue
                stack.append(value)


def _is_operator(target: str) -> bool:
    return bool(_ATEN.fullmatch(target)) or target in _ARITHMETIC or target in _REGIONS


def _check_expression(path: Path, text: str) -> None:
    unquoted = _SYMBOL.sub("", text)
    names = {name for name in re.findall(r"[A-Za-z_]\w*", unquoted) if not re.fullmatch(r"s\d+", name)}
    if not _EXPRESSION.fullmatch(text) or "'" in unquoted or names - _SYMPY_NAMES:
        raise _refuse(path, f"the shape expression {text[:80]!r} is not integer arithmetic on sizes")


def _check_guard(path: Path, guard: Any) -> None:
    if not isinstance(guard, str) or not _GUARD.fullmatch(_SIZE.sub("0", guard)):
        raise _refuse(path, f"the guard {str(guard)[:80]!r} is not arithmetic on input sizes")


def _check_tensors_only(path: Path, data: bytes) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about the file before refusing it
            torch.load(io.BytesIO(data), weights_only=True)
    except Exception:
        raise _refuse(path, "its sample inputs hold objects other than tensors") from None
