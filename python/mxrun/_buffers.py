"""The modules' buffers (BatchNorm's running statistics and counts) as of the last completed step.

When a peer fails mid-step, the survivors' forward of the step they abandon has already moved
their BatchNorm running statistics; the group then agrees on a survivor's state, and the run would
end a little off an undisturbed one. So `mxrun.run` keeps a copy of every buffer of the modules in
its `state` at each completed step (one multi-tensor copy, `torch._foreach_copy_`) and puts it back
before the survivors offer their state: a recovered job ends bit for bit where an undisturbed one
does. Parameters and the optimizer need nothing: they change only in the optimizer step, after
which `step_done` comes.
"""


class BufferSnapshot:
    def __init__(self, state):
        self._state = state
        self._live = None  # the buffers, found at the first take()
        self._copy = None

    def _buffers(self):
        if self._live is None:
            import torch
            self._live = [b for holder in self._state.values()
                          if isinstance(holder, torch.nn.Module) for b in holder.buffers()]
        return self._live

    def take(self):
        """The buffers now are a completed step's."""
        import torch
        live = self._buffers()
        if not live:
            return
        with torch.no_grad():
            if self._copy is None or len(self._copy) != len(live):
                self._copy = [b.detach().clone() for b in live]
            else:
                torch._foreach_copy_(self._copy, live)

    def restore(self):
        """Back to the last take(): what an abandoned step's forward moved is undone."""
        if not self._copy or self._live is None or len(self._copy) != len(self._live):
            return
        import torch
        with torch.no_grad():
            torch._foreach_copy_(self._live, self._copy)
