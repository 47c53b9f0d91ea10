"""A rank's state as a host-memory image (python/mxrun/_image.py): taken now, loaded bit for bit,
its buffers reused; from a GPU, copied without blocking the loop and waited for when read (that
case runs where torch sees a GPU: scripts/gpu/ and the GPU issue's machine)."""
import unittest

import torch

from mxrun import _image


def _trained(device="cpu"):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Linear(4, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        model(torch.randn(3, 8, device=device)).sum().backward()
        optimizer.step()
    return model, optimizer


def _flat(state_dict):
    return [(k, v.detach().cpu().clone()) for k, v in state_dict.items()]


class ImageTest(unittest.TestCase):
    def test_taken_now_and_loaded_bit_for_bit(self):
        model, optimizer = _trained()
        expected = _flat(model.state_dict())
        momentum = [optimizer.state[p]["momentum_buffer"].clone() for p in model.parameters()]
        image = _image.take({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
        with torch.no_grad():  # later changes do not reach the image
            for p in model.parameters():
                p.add_(1.0)
            for p in model.parameters():
                optimizer.state[p]["momentum_buffer"].mul_(3.0)
        _image.load(image, {"model": model, "optimizer": optimizer})
        for (name, want), (_, got) in zip(expected, _flat(model.state_dict())):
            self.assertTrue(torch.equal(want, got), name)
        for want, p in zip(momentum, model.parameters()):
            self.assertTrue(torch.equal(want, optimizer.state[p]["momentum_buffer"]))

    def test_a_reused_image_gives_its_buffers_when_they_fit(self):
        model, _ = _trained()
        first = _image.take({"model": model.state_dict()})
        pointer = first.flats[torch.float32].data_ptr()
        second = _image.take({"model": model.state_dict()}, reuse=first)
        self.assertEqual(second.flats[torch.float32].data_ptr(), pointer)
        bigger = torch.nn.Linear(16, 16)
        third = _image.take({"model": bigger.state_dict()}, reuse=second)
        self.assertNotEqual(third.flats[torch.float32].data_ptr(), pointer)
        self.assertEqual(third.nbytes(), (16 * 16 + 16) * 4)

    @unittest.skipUnless(torch.cuda.is_available(), "no GPU that torch sees")
    def test_from_the_gpu_pinned_not_blocking_and_waited_for_when_read(self):
        model, optimizer = _trained("cuda")
        expected = _flat(model.state_dict())
        image = _image.take({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
        with torch.no_grad():  # queued after the copies: the image holds the state before
            for p in model.parameters():
                p.add_(1.0)
        flat = image.flats[torch.float32]
        self.assertTrue(flat.is_pinned())
        self.assertFalse(image._events)  # read once: waited for
        _image.load(image, {"model": model, "optimizer": optimizer}, device="cuda")
        for (name, want), (_, got) in zip(expected, _flat(model.state_dict())):
            self.assertTrue(torch.equal(want, got), name)


if __name__ == "__main__":
    unittest.main()
