"""The redundant copy's plan (python/mxrun/_copy_plan.py): who keeps whose shards, and where each
rank's state comes from after a loss. Pure: no torch, no processes."""
import unittest

from mxrun._copy_plan import COPY, LIVE, REPLICA, SNAPSHOT, Holdings, Mesh, restore_plan


class MeshTest(unittest.TestCase):
    def test_a_1d_mesh_copies_to_the_ring_neighbour(self):
        mesh = Mesh(4)
        self.assertEqual([mesh.copy_keeper(r) for r in range(4)], [1, 2, 3, 0])
        self.assertEqual([mesh.copied_from(r) for r in range(4)], [3, 0, 1, 2])
        self.assertEqual(mesh.replicas(2), [])

    def test_on_several_nodes_the_copy_goes_to_the_next_node(self):
        mesh = Mesh(6, per_node=2)  # nodes {0, 1}, {2, 3}, {4, 5}
        self.assertEqual([mesh.copy_keeper(r) for r in range(6)], [2, 3, 4, 5, 0, 1])
        self.assertEqual([mesh.copied_from(r) for r in range(6)], [4, 5, 0, 1, 2, 3])
        one_node = Mesh(4, per_node=4)
        self.assertEqual([one_node.copy_keeper(r) for r in range(4)], [1, 2, 3, 0])
        uneven = Mesh(5, per_node=2)
        self.assertEqual(uneven.copy_keeper(4), 0)
        with self.assertRaises(ValueError):
            Mesh(4, per_node=0)

    def test_hsdp_keeps_no_copy_its_replicas_hold_the_shards(self):
        mesh = Mesh(6, replicate=2)  # ranks 0-2 and 3-5 are the two replica groups
        self.assertIsNone(mesh.copy_keeper(1))
        self.assertEqual(mesh.replicas(1), [4])
        self.assertEqual(Mesh(6, replicate=3).replicas(5), [1, 3])

    def test_a_mesh_that_does_not_divide_is_refused(self):
        for world, replicate in ((4, 3), (0, 1), (4, 0)):
            with self.assertRaises(ValueError):
                Mesh(world, replicate)


class RestoreTest(unittest.TestCase):
    def test_a_lost_rank_comes_from_its_neighbour_s_copy_the_others_keep_their_own(self):
        held = {0: Holdings(10, {10}), 2: Holdings(10, {10}, {1: {9, 10}}), 3: Holdings(10, {10})}
        plan = restore_plan(Mesh(4), held)
        self.assertIsNone(plan.error)
        self.assertEqual(plan.step, 10)
        self.assertEqual(plan.sources, {0: (LIVE, 0), 1: (COPY, 2), 2: (LIVE, 2), 3: (LIVE, 3)})

    def test_a_survivor_one_step_past_the_lost_rank_s_copy_goes_back_to_its_snapshot(self):
        # Rank 1 died after step 11's collectives but before its copy of 11 went out: rank 0
        # finished step 11, so the group goes on from 10, rank 0 from its snapshot of it.
        held = {0: Holdings(11, {10, 11}, {3: {10, 11}}), 2: Holdings(10, {9, 10}, {1: {9, 10}}),
                3: Holdings(10, {9, 10})}
        plan = restore_plan(Mesh(4), held)
        self.assertEqual(plan.step, 10)
        self.assertEqual(plan.sources[0], (SNAPSHOT, 0))
        self.assertEqual(plan.sources[1], (COPY, 2))

    def test_ring_neighbours_lost_together_are_refused_with_the_reason(self):
        held = {0: Holdings(10, {10}, {3: {10}}), 3: Holdings(10, {10}, {2: {10}})}
        plan = restore_plan(Mesh(4), held)
        self.assertIsNone(plan.step)
        self.assertIn("rank 1 and rank 2, which kept its copy, were lost together", plan.error)

    def test_hsdp_takes_a_lost_rank_s_shards_from_its_replica_peer(self):
        held = {0: Holdings(7), 2: Holdings(7), 3: Holdings(7)}
        plan = restore_plan(Mesh(4, replicate=2), held)
        self.assertEqual(plan.step, 7)
        self.assertEqual(plan.sources[1], (REPLICA, 3))
        both = restore_plan(Mesh(4, replicate=2), {0: Holdings(7), 2: Holdings(7)})
        self.assertIn("every replica of some shards was lost", both.error)

    def test_the_newest_step_held_for_every_rank_wins(self):
        held = {0: Holdings(12, {11, 12}), 1: Holdings(12, {11, 12}, {0: {11, 12}}),
                2: Holdings(12, {11, 12}, {1: {11}})}  # 3 lost; its copy (kept by 0) is missing
        held[0].copies[3] = {11}
        plan = restore_plan(Mesh(4), held)
        self.assertEqual(plan.step, 11)
        self.assertEqual(plan.sources[3], (COPY, 0))
        self.assertEqual(plan.sources[0], (SNAPSHOT, 0))

    def test_nothing_left_or_a_rank_outside_the_world(self):
        self.assertIn("every rank was lost", restore_plan(Mesh(2), {}).error)
        with self.assertRaises(ValueError):
            restore_plan(Mesh(2), {2: Holdings(1)})


if __name__ == "__main__":
    unittest.main()
