"""Which environment variables Python code read by name while it ran, and which module read each:
the runtime guard of a pre-started interpreter (`_prestart.py`). A module imported ahead that
reads a variable a round sets later (Lightning keeps `RANK` at import, for one) would keep the
standby's value, silently wrong once the interpreter has a rank; `_prestart` asks this what the
imports read and starts a fresh interpreter instead.

What it sees: every read through `os.environ` (`os.environ[k]`, `.get`, `os.getenv`, `k in
os.environ`), all of which go through `os._Environ.__getitem__`. What it does not: a C
extension's `getenv()` (for torch itself, `tests/python/test_prestart.py` traces those with an
LD_PRELOAD shim), and a walk over the whole environment, which reads only the variables the
standby has (none of a round's but mxrun's own) and is told apart and not counted.
"""
import os
import sys
from contextlib import contextmanager

# os's and the mapping ABCs' own frames (`os.getenv`, `Mapping.get`): "<frozen os>" where the
# interpreter has them frozen (3.11's default), their files where it does not.
_OWN_FILES = (os.__file__, getattr(sys.modules.get("_collections_abc"), "__file__", None))


def _reader(frame):
    """The module whose code asked, past os's and the mapping ABCs' own frames."""
    while frame is not None and (frame.f_code.co_filename in _OWN_FILES
                                 or frame.f_code.co_filename.startswith("<")):
        frame = frame.f_back
    return frame.f_globals.get("__name__", "?") if frame is not None else "?"


@contextmanager
def watched(reads):
    """Within the block, adds (variable, reading module) to the set `reads` for every read by
    name; restores os.environ's reads on leaving, whatever happened."""
    original = os._Environ.__getitem__

    def traced(self, key):
        caller = sys._getframe(1)
        if caller.f_code.co_name != "__iter__":  # ItemsView and ValuesView walk every key
            reads.add((key, _reader(caller)))
        return original(self, key)

    os._Environ.__getitem__ = traced
    try:
        yield reads
    finally:
        os._Environ.__getitem__ = original
