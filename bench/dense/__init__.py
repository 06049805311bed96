"""Benchmarks of the dense tasks: ``python -m bench.dense.detect`` (DETR's step per slot value),
``python -m bench.dense.fpn_border`` (the Semantic FPN's padding study), ``python -m bench.dense.padding``
(what a padding mask costs)."""
