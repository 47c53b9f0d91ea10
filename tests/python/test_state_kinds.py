"""Which state is the group's and which is each rank's own (python/mxrun/_classify.py): the plan
alone (no processes), then `mxrun.run` in real PyTorch processes (2 ranks, Gloo) with state that
differs by rank: nothing a rank holds of its own is replaced by another rank's."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import mxrun
from mxrun import _classify
from mxrun._classify import DTENSOR, PER_RANK, PER_RANK_VALUE, REPLICATED, TENSOR, VALUE, Leaf

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(mxrun.__file__)))
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "state_kinds_worker.py")


def leaf(path, kind=TENSOR, meta="(4,) torch.float32", digest="d"):
    return Leaf(tuple(path.split("/")), kind, meta, digest)


class PlanTest(unittest.TestCase):
    def test_equal_state_is_replicated_and_goes_to_a_new_rank(self):
        ranks = [[leaf("model/w"), leaf("position/offset", VALUE, "int", "7")]] * 2
        plan = _classify.plan(ranks + [[leaf("model/w", digest="fresh")]], [0, 1], 0)
        self.assertIsNone(plan.error)
        self.assertIsNone(plan.warning)
        self.assertEqual(plan.classes[("model", "w")], REPLICATED)
        self.assertTrue(plan.shared(("model", "w")))
        self.assertFalse(plan.keeps_own(("model", "w"), holder=True))

    def test_a_shape_that_differs_by_rank_is_kept_and_refused_to_a_new_rank(self):
        ranks = [[leaf("own/t", meta="(1,) torch.float32")], [leaf("own/t", meta="(2,) torch.float32")]]
        plan = _classify.plan(ranks, [0, 1], 0)
        self.assertIsNone(plan.error)  # nobody new: each keeps its own
        self.assertEqual(plan.classes[("own", "t")], PER_RANK)
        self.assertFalse(plan.shared(("own", "t")))
        self.assertTrue(plan.keeps_own(("own", "t"), holder=True))
        self.assertEqual(plan.per_rank, [("own", "t")])
        refused = _classify.plan(ranks + [[leaf("own/t", meta="(3,) torch.float32")]], [0, 1], 0)
        self.assertIn("rank 2 takes this round without the group's state", refused.error)
        self.assertIn("'own/t' (differs by rank: (1,) torch.float32 on rank 0, (2,) "
                      "torch.float32 on rank 1)", refused.error)
        self.assertIn("the group restarts instead", refused.error)

    def test_a_dtensor_is_each_rank_own_even_with_one_holder(self):
        shard = leaf("model/w", DTENSOR, "(16, 8) torch.float32 [Shard(dim=0)]", None)
        plan = _classify.plan([[shard], [shard]], [1], 1)
        self.assertEqual(plan.classes[("model", "w")], PER_RANK)
        self.assertIn("rank 0 takes this round", plan.error)
        self.assertIn("a DTensor: (16, 8) torch.float32 [Shard(dim=0)]", plan.error)

    def test_values_that_differ_are_kept_and_a_new_rank_takes_the_source_s_with_a_warning(self):
        ranks = [[leaf("model/bn.running_mean", digest="a")],
                 [leaf("model/bn.running_mean", digest="b")], [leaf("model/bn.running_mean")]]
        plan = _classify.plan(ranks, [0, 1], 0)
        self.assertIsNone(plan.error)
        self.assertEqual(plan.classes[("model", "bn.running_mean")], PER_RANK_VALUE)
        self.assertTrue(plan.shared(("model", "bn.running_mean")))  # for rank 2
        self.assertTrue(plan.keeps_own(("model", "bn.running_mean"), holder=True))
        self.assertIn("1 state entry differ by rank in value ('model/bn.running_mean'",
                      plan.warning)
        self.assertIn("new rank 2 takes rank 0's", plan.warning)
        self.assertIsNone(_classify.plan(ranks[:2], [0, 1], 0).warning)  # nobody new: no word

    def test_only_holders_values_count(self):
        # A new process's fresh values differ from the group's: still replicated.
        plan = _classify.plan([[leaf("m/w")], [leaf("m/w", meta="(9,) torch.float32", digest="x")]],
                              [0], 0)
        self.assertEqual(plan.classes[("m", "w")], REPLICATED)
        self.assertIsNone(plan.error)

    def test_what_was_per_rank_in_an_earlier_round_stays_so(self):
        # One survivor cannot show that its entry differs from the lost rank's: remembered.
        plan = _classify.plan([[leaf("own/t")], [leaf("own/t")]], [0], 0, known=[("own", "t")])
        self.assertEqual(plan.classes[("own", "t")], PER_RANK)
        self.assertIn("'own/t' (per-rank in an earlier round)", plan.error)

    def test_holders_whose_structure_differs_are_refused(self):
        plan = _classify.plan([[leaf("opt/state/0")], [leaf("opt/state/1")]], [0, 1], 0)
        self.assertIn("differ in its structure: 'opt/state/0', 'opt/state/1' not on every one",
                      plan.error)

    def test_the_source_must_hold_the_state(self):
        with self.assertRaises(ValueError):
            _classify.plan([[leaf("m/w")], [leaf("m/w")]], [1], 0)


def run_ranks(kind, *extra, world=2):
    """Each rank's JSON line, and the ranks' stderr, of state_kinds_worker.py."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MXRUN_")}
        env.update(PYTHONPATH=PYTHON_DIR, OMP_NUM_THREADS="1")
        children = [subprocess.Popen([sys.executable, WORKER, os.path.join(tmp, "store"), str(r),
                                      str(world), kind, *extra], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True) for r in range(world)]
        outs, errs = [], []
        for child in children:
            out, err = child.communicate(timeout=120)
            outs.append(out)
            errs.append(err)
        lines = {}
        for out in outs:
            for line in out.splitlines():
                record = json.loads(line)
                lines[record["rank"]] = record
        return lines, errs, [c.returncode for c in children]


class StateKindsTest(unittest.TestCase):
    def test_state_that_differs_by_rank_stays_each_rank_own(self):
        got, errs, codes = run_ranks("per-rank")
        self.assertEqual(codes, [0, 0], errs)
        self.assertEqual(got[0]["t"], [0.0])
        self.assertEqual(got[1]["t"], [1.0, 1.0])  # not rank 0's [0.0]
        self.assertEqual((got[0]["n"], got[1]["n"]), (0, 10))
        self.assertEqual((got[0]["seen"], got[1]["seen"]), ([0.0], [1.0]))

    def test_fsdp2_shards_stay_each_rank_own_and_train_as_without_mxrun(self):
        got, errs, codes = run_ranks("fsdp2")
        self.assertEqual(codes, [0, 0], errs)
        plain, errs, codes = run_ranks("fsdp2", "plain")
        self.assertEqual(codes, [0, 0], errs)
        for r in (0, 1):
            self.assertEqual(got[r]["digest"], plain[r]["digest"], f"rank {r}")
        self.assertNotEqual(got[0]["digest"], got[1]["digest"])  # each its own shards

    def test_a_zero_redundancy_optimizer_is_refused_at_once(self):
        _, errs, codes = run_ranks("zero")
        self.assertEqual(codes, [1, 1])
        for err in errs:
            self.assertIn("is a ZeroRedundancyOptimizer, which shards its state by rank", err)


if __name__ == "__main__":
    unittest.main()
