"""An input-size check inside an exported ONNX graph, so any ONNX runtime refuses a size the graph was not built for.

``torch.export`` takes the range of sizes as an assumption and drops its checks from the ONNX file,
so onnxruntime would run a 30×32 or a 512×512 image through a graph built for multiples of 16 in
64..1024 and return numbers. :func:`add_size_check` puts a few nodes before the graph: from the
input's shape they compute whether both sides are multiples of the stride within the range, and a
``Gather`` from a one-element table at index 0 (sizes that fit) or 1 (any other) fails on the latter,
with the node's name, which states the rule, in the runtime's error. The gathered 0 is added to the
images, so the result is the input unchanged.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["add_size_check", "size_rule"]

_PREFIX = "vitpos_size_check_"


def size_rule(min_size: int, max_size: int, stride: int) -> str:
    """The rule the check enforces, in words: the name of the node whose failure reports it."""
    return f"image size check: both sides must be multiples of {stride} in {min_size}..{max_size}"


def add_size_check(path: str | Path, input_name: str, min_size: int, max_size: int, stride: int) -> None:
    """Rewrite the ONNX file at ``path`` so its graph checks the height and width of ``input_name`` first."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(path), load_external_data=False)  # weights stored apart stay where they are
    graph = model.graph
    checked = _PREFIX + "images"
    for node in graph.node:
        node.input[:] = [checked if name == input_name else name for name in node.input]
    for output in graph.output:  # a graph that returns its input unchanged
        if output.name == input_name:
            raise ValueError(f"the ONNX graph returns its input {input_name!r} as is; nothing to check")
    p = _PREFIX
    constants: dict[str, np.ndarray] = {
        "starts": np.array([2], np.int64),
        "ends": np.array([4], np.int64),
        "stride": np.array(stride, np.int64),
        "min": np.array(min_size, np.int64),
        "max": np.array(max_size, np.int64),
        "zero": np.array(0, np.int64),
        "one": np.array(1, np.int64),
        "table": np.zeros(1, np.float32),
    }
    graph.initializer.extend(numpy_helper.from_array(value, p + key) for key, value in constants.items())
    nodes = [
        helper.make_node("Shape", [input_name], [p + "shape"]),
        helper.make_node("Slice", [p + "shape", p + "starts", p + "ends"], [p + "hw"]),
        helper.make_node("Mod", [p + "hw", p + "stride"], [p + "remainder"]),
        helper.make_node("Equal", [p + "remainder", p + "zero"], [p + "divisible"]),
        helper.make_node("GreaterOrEqual", [p + "hw", p + "min"], [p + "large"]),
        helper.make_node("LessOrEqual", [p + "hw", p + "max"], [p + "small"]),
        helper.make_node("And", [p + "divisible", p + "large"], [p + "both"]),
        helper.make_node("And", [p + "both", p + "small"], [p + "fits"]),
        helper.make_node("Cast", [p + "fits"], [p + "fits_int"], to=TensorProto.INT64),
        helper.make_node("ReduceMin", [p + "fits_int"], [p + "all_fit"], keepdims=1),
        helper.make_node("Sub", [p + "one", p + "all_fit"], [p + "index"]),
        helper.make_node(
            "Gather", [p + "table", p + "index"], [p + "zero_pad"], name=size_rule(min_size, max_size, stride)
        ),
        helper.make_node("Add", [input_name, p + "zero_pad"], [checked]),
    ]
    for node in reversed(nodes):
        graph.node.insert(0, node)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
