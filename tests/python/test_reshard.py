"""Re-sharding images in memory (python/mxrun/_reshard.py): FSDP2's Shard(0) chunks of a group of
4 made into the chunks of a group of 2 (or 3), the bytes unchanged; what cannot be re-sharded is
refused. Real torch tensors, no processes."""
import unittest

import torch
from torch.distributed.tensor import Replicate, Shard

from mxrun import _image, _reshard
from mxrun._state import StateRefused


def image(rank, world, full, placements=None, mesh=None, extra=None):
    """Rank `rank`'s image of {"model": {"w": chunk of full, "n": extra}}."""
    chunks = list(torch.chunk(full, world))
    chunks += [full.new_empty((0,) + tuple(full.shape[1:]))] * (world - len(chunks))
    local = chunks[rank] if placements is None else full
    meta = (placements or (Shard(0),), tuple(full.shape), full.stride(), mesh or (world,), None)
    structure = {"model": {"w": _image._Local(local.dtype, tuple(local.shape), 0, meta),
                           "n": _image._Local(torch.int64, (), 0, None)}}
    flats = {torch.float32: local.reshape(-1).clone(),
             torch.int64: torch.tensor([extra if extra is not None else rank])}
    return _image.Image(structure, flats)


class ReshardTest(unittest.TestCase):
    def check(self, rows, old, new):
        full = torch.arange(rows * 3, dtype=torch.float32).view(rows, 3)
        images = {r: image(r, old, full) for r in range(old)}
        pieces = []
        for k in range(new):
            got = _reshard.reshard(images, own=k % old, new_rank=k, new_world=new)
            tensors = _image.tensors(got)
            piece, meta = tensors[("model", "w")]
            self.assertEqual(meta[3], (new,))
            self.assertEqual(meta[1], (rows, 3))
            self.assertEqual(int(tensors[("model", "n")][0]), k % old)  # its own, not re-sharded
            pieces.append(piece)
        self.assertTrue(torch.equal(torch.cat(pieces), full))
        want = list(torch.chunk(full, new))
        for k, piece in enumerate(pieces[:len(want)]):
            self.assertTrue(torch.equal(piece, want[k]))

    def test_four_chunks_become_two_bit_for_bit(self):
        self.check(10, 4, 2)

    def test_uneven_and_empty_chunks(self):
        self.check(3, 4, 2)  # old: 1, 1, 1, 0 rows
        self.check(7, 2, 3)
        self.check(1, 4, 3)

    def test_what_is_not_fsdp2_s_shard0_is_refused_with_the_reason(self):
        full = torch.zeros(4, 2)
        for placements, mesh in (((Replicate(),), None), ((Shard(1),), None),
                                 ((Replicate(), Shard(0)), (2, 2))):
            images = {r: image(r, 4, full, placements, mesh) for r in range(4)}
            with self.assertRaisesRegex(StateRefused, "Shard\\(0\\) over a 1-D mesh only"):
                _reshard.reshard(images, own=0, new_rank=0, new_world=2)

    def test_every_old_rank_s_image_is_needed(self):
        full = torch.zeros(4, 2)
        with self.assertRaises(ValueError):
            _reshard.reshard({0: image(0, 4, full), 2: image(2, 4, full)}, 0, 0, 2)


if __name__ == "__main__":
    unittest.main()
