"""The random number generators as one entry of `mxrun.run`'s state: `{"rng": mxrun.RNG()}`.

A new rank then takes them from the rank the state came from, and goes on drawing what that rank
would have drawn: torch's CPU generator, this rank's GPU generator when CUDA is in use, Python's
`random`, and numpy's global generator when the script imported numpy. This is right for a
script whose ranks draw the same numbers (seeded alike, as DDP scripts usually are: shuffling,
augmentation, dropout). Ranks seeded by rank each have their own stream, which a new process
cannot get back from the others: such a script restarts its stream from its own seed.
"""
import random
import sys


class RNG:
    def state_dict(self):
        import torch
        state = {"torch": torch.get_rng_state(), "python": random.getstate()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state()
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            state["numpy"] = numpy.random.get_state()
        return state

    def load_state_dict(self, state):
        import torch
        torch.set_rng_state(state["torch"].cpu())
        random.setstate(state["python"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state(state["cuda"].cpu())
        numpy = sys.modules.get("numpy")
        if "numpy" in state and numpy is not None:
            numpy.random.set_state(state["numpy"])
