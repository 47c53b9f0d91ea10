"""A rank's own work per step (python/mxrun/_busy_time.py): real torch modules and optimizers, a
clock the test moves (the modules' forwards and the "input" between steps move it), so every
figure is exact. One case wraps the model in a real one-rank DDP over Gloo."""
import os
import tempfile
import unittest

import torch
import torch.distributed as dist

from mxrun import _busy_time


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Timed(torch.nn.Module):
    """A model whose forward takes `forward_s` on the test's clock."""

    def __init__(self, clock, forward_s):
        super().__init__()
        self.clock = clock
        self.forward_s = forward_s
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, x):
        self.clock.now += self.forward_s
        return self.linear(x)


class BusyClockTest(unittest.TestCase):
    def setUp(self):
        self.clock = FakeClock()
        self.busy = _busy_time.BusyClock(clock=self.clock)
        self.handles = []
        self.addCleanup(self.busy.stop)

    def train(self, model, optimizer, steps, input_s, micro_batches=1, before_forward=None):
        """`steps` optimizer steps, each after `input_s` of input; the busy time of each."""
        seen = []
        for _ in range(steps):
            self.clock.now += input_s
            for _ in range(micro_batches):
                if before_forward is not None:
                    before_forward()
                model(torch.randn(8, 4)).pow(2).mean().backward()
                self.clock.now += 7.0  # backward: not the rank's own work alone (DDP waits)
            optimizer.step()
            optimizer.zero_grad()
            self.busy.step_ended(optimizer)
            seen.append(self.busy.take())
        return seen

    def test_input_and_forward_from_the_second_step_on(self):
        model = Timed(self.clock, 0.5)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        # Step 1 has no previous step to count input from; the model is found in step 2.
        self.assertEqual(self.train(model, optimizer, 4, input_s=0.25), [None, 0.75, 0.75, 0.75])
        self.assertIsNone(self.busy.take())  # taken once

    def test_every_micro_batch_s_forward_and_the_first_input(self):
        model = Timed(self.clock, 0.5)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.assertEqual(self.train(model, optimizer, 3, input_s=0.25, micro_batches=4),
                         [None, 2.25, 2.25])

    def test_an_evaluation_without_gradients_is_left_out(self):
        model = Timed(self.clock, 0.5)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.train(model, optimizer, 2, input_s=0.25)

        def evaluate():
            with torch.no_grad():
                model(torch.randn(8, 4))
        self.assertEqual(self.train(model, optimizer, 2, input_s=0.25, before_forward=evaluate),
                         [1.25, 1.25])  # the evaluation's forward (0.5 s) counted as input only

    def test_a_loss_module_and_another_model_are_not_the_model(self):
        model = Timed(self.clock, 0.5)
        teacher = Timed(self.clock, 2.0)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = torch.nn.MSELoss()

        def others_first():
            with torch.no_grad():
                teacher(torch.randn(8, 4))
            loss(torch.zeros(2), torch.ones(2))
        self.assertEqual(self.train(model, optimizer, 3, input_s=0.25, before_forward=others_first),
                         [None, 2.75, 2.75])  # the teacher's forward is input, not the model's

    def test_a_model_never_called_is_searched_for_three_steps_then_not_at_all(self):
        weight = torch.nn.Parameter(torch.ones(4))
        optimizer = torch.optim.SGD([weight], lr=0.1)
        unrelated = Timed(self.clock, 0.5)
        for _ in range(5):
            unrelated(torch.randn(8, 4))
            weight.sum().backward()
            optimizer.step()
            self.busy.step_ended(optimizer)
            self.assertIsNone(self.busy.take())
        self.assertIsNone(self.busy._search_handle)
        from torch.nn.modules import module as torch_module
        self.assertFalse(any(h == self.busy._searching
                             for h in torch_module._global_forward_pre_hooks.values()))

    def test_a_new_optimizer_is_searched_again(self):
        model = Timed(self.clock, 0.5)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.train(model, optimizer, 2, input_s=0.25)
        restored = torch.optim.SGD(model.parameters(), lr=0.1)
        self.assertEqual(self.train(model, restored, 3, input_s=0.5), [None, 1.0, 1.0])

    def test_a_failing_measurement_never_fails_the_forward(self):
        model = Timed(self.clock, 0.5)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.train(model, optimizer, 2, input_s=0.25)

        def broken():
            raise RuntimeError("clock gone")
        self.busy._clock = broken
        model(torch.randn(8, 4)).sum().backward()  # the forward still runs
        self.assertTrue(self.busy.stopped)
        self.assertEqual(model._forward_pre_hooks, {})
        self.assertEqual(model._forward_hooks, {})

    def test_inside_ddp_the_inner_module_is_timed(self):
        with tempfile.TemporaryDirectory() as folder:
            dist.init_process_group("gloo", init_method="file://" + os.path.join(folder, "store"),
                                    rank=0, world_size=1)
            try:
                inner = Timed(self.clock, 0.5)
                model = torch.nn.parallel.DistributedDataParallel(inner)

                def waits(module, args):
                    self.clock.now += 3.0  # the wrapper's own wait (its buffer broadcast)
                model.register_forward_pre_hook(waits)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                self.assertEqual(self.train(model, optimizer, 3, input_s=0.25),
                                 [None, 0.75, 0.75])
                self.assertEqual(len(inner._forward_pre_hooks), 1)
            finally:
                dist.destroy_process_group()


if __name__ == "__main__":
    unittest.main()
