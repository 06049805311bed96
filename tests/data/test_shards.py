"""WebDataset shards: brace patterns, the same samples as the folder they were written from, exact epochs."""

import tarfile

import pytest
import torch

from vitpos.cli import main
from vitpos.data import open_data
from vitpos.data.crops import TrainCrop
from vitpos.data.shard_stream import ShardStream
from vitpos.data.shards import expand_braces
from vitpos.data.views import AugmentedViews
from vitpos.engine.distributed import Dist
from vitpos.engine.sampling import rank_batches

from ..photos import photo_folder


def test_brace_patterns_expand_as_webdataset_does():
    assert expand_braces("a-{000..002}.tar") == ["a-000.tar", "a-001.tar", "a-002.tar"]
    assert expand_braces("{x,y}/s-{8..10}.tar") == [
        "x/s-8.tar",
        "x/s-9.tar",
        "x/s-10.tar",
        "y/s-8.tar",
        "y/s-9.tar",
        "y/s-10.tar",
    ]
    with pytest.raises(ValueError, match="never closes"):
        expand_braces("s-{0..3.tar")


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    root = tmp_path_factory.mktemp("photos")
    photo_folder(root / "folder", per_class=6, held=2)
    assert (
        main(
            [
                "shard",
                f"folder:{root / 'folder'}",
                str(root / "shards"),
                "--per-shard=5",
                "--no-shuffle",
                "--no-progress",
            ]
        )
        == 0
    )
    spec = f"wds:{root}/shards/train-{{000000..000004}}.tar:val={root}/shards/val-{{000000..000001}}.tar"
    return open_data(f"folder:{root / 'folder'}"), open_data(spec)


def test_shards_hold_the_folders_samples(sharded):
    folder, shards = sharded
    assert shards.info.classes == folder.info.classes and len(shards.train) == len(folder.train) == 24
    for name in ("train", "val"):
        a, b = folder.split(name).at_size(32), shards.split(name).at_size(32)
        every = torch.arange(len(a))
        (xa, ya), (xb, yb) = a[every], b[every]
        assert torch.equal(xa, xb) and torch.equal(ya, yb)  # the same evaluation crops of the same images
    keys = rank_batches(24, 8, seed=0, epoch=0, ctx=Dist(), repeats=3)
    crop = TrainCrop((32, 32))
    for key in keys:  # and the same random views
        va, vb = AugmentedViews(folder.train, crop, 0, 0)[key], AugmentedViews(shards.train, crop, 0, 0)[key]
        assert torch.equal(va[0], vb[0]) and torch.equal(va[1], vb[1])


def _stream(shards, rank=0, world=1, start=0, steps=3, repeats=1):
    return ShardStream(
        shards.train,
        TrainCrop((16, 16)),
        seed=1,
        epoch=2,
        rank=rank,
        world=world,
        local_batch=8 // world,
        steps=steps,
        start=start,
        buffer=6,
        repeats=repeats,
    )


def test_stream_splits_shards_over_ranks_with_exact_epochs(sharded):
    folder, shards = sharded
    whole = TrainCrop((16, 16), scale=None, hflip=0.0)  # no randomness: each image maps to one view
    reference = {}
    for i in range(len(folder.train)):
        img, label = folder.train.open_sample(i)
        reference[whole(img, None).numpy().tobytes()] = int(label)
    ranks = [
        list(ShardStream(shards.train, whole, seed=1, epoch=2, rank=r, world=2, local_batch=4, steps=3, buffer=6))
        for r in range(2)
    ]
    assert [len(r) for r in ranks] == [3, 3]  # exact epoch: 24 images / global batch 8, on every rank
    seen = []
    for rank in ranks:
        keys = [x.numpy().tobytes() for batch, _ in rank for x in batch]
        labels = [int(y) for _, ys in rank for y in ys]
        assert [reference[k] for k in keys] == labels  # the folder's images, with their labels
        seen.append(set(keys))
    assert not seen[0] & seen[1]  # each rank streams shards of its own


def test_stream_resumes_mid_epoch_with_the_same_batches(sharded):
    _, shards = sharded
    full = list(_stream(shards, steps=3))
    resumed = list(_stream(shards, steps=3, start=1))
    assert len(resumed) == 2
    for (a, ya), (b, yb) in zip(full[1:], resumed, strict=True):
        assert torch.equal(a, b) and torch.equal(ya, yb)
    loader = torch.utils.data.DataLoader(_stream(shards, steps=3, start=1), batch_size=None, num_workers=0)
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(full[1:], loader, strict=True))


def test_a_broken_shard_names_the_file(tmp_path):
    (tmp_path / "s-0.tar").write_bytes(b"not a tar")
    (tmp_path / "s-1.tar").write_bytes(b"")
    with pytest.raises(ValueError, match=r"s-0\.tar is not a readable tar file"):
        open_data(f"wds:{tmp_path}/s-{{0..1}}.tar")
    with tarfile.open(tmp_path / "s-2.tar", "w") as tar:
        tar.add(__file__, arcname="a.jpg")
    with pytest.raises(ValueError, match=r"image a has no \.cls member"):
        open_data(f"wds:{tmp_path}/s-2.tar:val={tmp_path}/s-2.tar")
    with pytest.raises(FileNotFoundError, match=r"1 shard\(s\) missing"):
        open_data(f"wds:{tmp_path}/s-{{2..3}}.tar")


def test_stream_repeats_each_sample(sharded):
    _, shards = sharded
    whole = TrainCrop((16, 16), scale=None, hflip=0.0)
    # a buffer of one does not shuffle: the copies of each sample come out in a row
    stream = ShardStream(
        shards.train, whole, seed=1, epoch=2, rank=0, world=1, local_batch=6, steps=4, buffer=1, repeats=3
    )
    images = torch.cat([x for x, _ in stream])
    runs = images.view(8, 3, -1)
    assert all(torch.equal(run[0], run[1]) and torch.equal(run[0], run[2]) for run in runs)
    assert len({run[0].numpy().tobytes() for run in runs}) == 8  # a third of the epoch's images, each three times
