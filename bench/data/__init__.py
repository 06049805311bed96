"""``python -m bench.data`` (:mod:`.__main__`): the DeiT recipe's data path end to end against its parts
(:mod:`.pipeline`, shared with the GPU quick check); ``python -m bench.data.coco_fixture``: a tiny COCO folder."""
