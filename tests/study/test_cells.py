"""The per-cell result store: atomic, resumable, damage-tolerant."""

from vitpos.study.cells import Cell, CellStore


def test_round_trip_and_unfinished_cells(tmp_path):
    store = CellStore(tmp_path)
    cell = Cell("peg", "direction", 1000, 2)
    assert store.load(cell) is None
    store.save(cell, {"test": 0.5})
    assert store.path(cell) == tmp_path / "peg" / "direction-n1000-seed2.json"
    assert store.load(cell) == {"test": 0.5}
    assert not list((tmp_path / "peg").glob(".*"))  # no temporary files left behind
    store.path(cell).write_text('{"test": 0.')  # a file cut short counts as unfinished
    assert store.load(cell) is None
