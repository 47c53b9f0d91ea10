"""How a rank joins the process group of a round: a new group, or the old one reconfigured.

Every round has a store of its own at MASTER_ADDR:MASTER_PORT, every key under "mxrun/round<N>/",
so nothing of an earlier round is read: mxrun's agent hosts it (TORCHELASTIC_USE_AGENT_STORE=True,
mxrun's default: a store per round, an earlier round's kept while clients use it), else the round's
rank 0 does (reusing its server of an earlier round when the port is the same). Then, one of two
ways:

- a new group (`new_group`, any PyTorch): a survivor abandons its broken group
  (`_abort_process_group`) and every rank calls init_process_group on the round's store;
- the old group reconfigured (`reconfigure`, PyTorch 2.14's experimental
  `torch.distributed._reconfigure`, asked for with MXRUN_RECONFIGURE=1 or `mxrun.run(...,
  reconfigure=True)`): survivors keep their group object and the new ranks make theirs with
  `enable_reconfigure=True`; each rank puts its reconfigure handle in the round's store, and all
  call `_reconfigure(uuid, handles in rank order)`, which re-forms the communicator in place.
  Every rank's group must live on the same store (the backend exchanges its addresses there, under
  the group's own prefix), and that store lives in the process that hosted it: in the agent, it
  survives any rank; in a rank 0, rounds reconfigure while that rank survives, and when it dies the
  round makes a new group (on its own store, which then serves later reconfigurations). `plan` decides this from what each rank says in the round's
  store, the same on every rank.
"""
import json
import os
import socket
import sys
import time
from datetime import timedelta

from . import _group_sockets

PG_PREFIX = "mxrun/pg/"  # the keys of a reconfigurable group on its store
TIMEOUT = timedelta(minutes=30)  # PyTorch's default for a process group

# Process groups left by re-formations, never destroyed: a group's destructor joins its threads,
# which may sit in a receive from a dead peer until the timeout (seen: the survivor hung in
# ~ProcessGroupGloo when the old DDP's reducer, its last owner, was freed). A few per failure.
_ABANDONED = []
_STORES = {}  # "host:port" -> the TCPStore server this process hosts, reused by later rounds
_pg_store = None  # "host:port" of the store this process's reconfigurable group lives on
_connections = set()  # the sockets the current group opened (_group_sockets.py)


def _dist():
    import torch.distributed as dist  # only where used: the package never imports torch itself
    return dist


def reconfigure_wanted(asked):
    """Whether to re-form groups with `_reconfigure`: `asked` (True/False), or None for the
    MXRUN_RECONFIGURE variable ("1" yes, "0" or unset no). Asked for on a PyTorch without it: a
    warning, and new groups."""
    if asked is None:
        value = os.environ.get("MXRUN_RECONFIGURE", "0")
        if value not in ("0", "1"):
            raise ValueError(f"MXRUN_RECONFIGURE must be 0 or 1, got {value!r}")
        asked = value == "1"
    if not asked:
        return False
    dist = _dist()
    if not hasattr(dist, "_reconfigure"):
        import torch
        print(f"mxrun: this PyTorch ({torch.__version__}) has no torch.distributed._reconfigure "
              "(2.14 and later): re-forming groups anew instead", file=sys.stderr, flush=True)
        return False
    return True


def _agent_store():
    """Whether mxrun's agent hosts the workers' stores (as PyTorch reads the variable)."""
    return os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"


def _address():
    return f"{os.environ['MASTER_ADDR']}:{int(os.environ['MASTER_PORT'])}"


def _wait_listening(host, port, timeout):
    """Waits until something listens on host:port. A TCPStore client refused at its first try
    pauses about a second before the next (seen: recoveries of 0.5 s or 1.0 s, depending on whether
    the new rank 0 had opened its store yet), so rank 0's store is awaited here instead."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() >= deadline:
                return  # the store's own timeout will say what is wrong
            time.sleep(0.005)


def _listening(address, timeout=1.0):
    """Whether something accepts a connection at "host:port" within `timeout` seconds."""
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
        return True
    except OSError:
        return False


def _store_at(address, host_it):
    """A TCPStore at "host:port": this process's server when `host_it` (made once, then reused),
    else a client."""
    dist = _dist()
    if host_it and address in _STORES:
        return _STORES[address]
    host, port = address.rsplit(":", 1)
    if not host_it:
        _wait_listening(host, int(port), TIMEOUT.total_seconds())
    store = dist.TCPStore(host, int(port), world_size=int(os.environ["WORLD_SIZE"]),
                          is_master=host_it, timeout=TIMEOUT, wait_for_workers=False)
    if host_it:
        _STORES[address] = store
    return store


def round_store(round_):
    """The round's store: (the TCPStore, a PrefixStore of the round's keys over it)."""
    dist = _dist()
    base = _store_at(_address(), int(os.environ["RANK"]) == 0 and not _agent_store())
    return base, dist.PrefixStore(f"mxrun/round{round_}/", base)


def abandon_group():
    """Leaves the default group without waiting for its peers."""
    global _pg_store, _connections
    dist = _dist()
    _pg_store = None
    _group_sockets.shut_down(_connections)  # peers still blocked on us are let go
    _connections = set()
    if not dist.is_initialized():
        return
    try:
        from torch.distributed.distributed_c10d import _get_default_group
        _ABANDONED.append(_get_default_group())
    except Exception:
        pass
    try:
        from torch.distributed.distributed_c10d import _abort_process_group
        _abort_process_group()
    except Exception:  # an older PyTorch, or a group already broken: drop it as it is
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def _init(init_process_group):
    """Runs `init_process_group`, noting the connections it opens."""
    global _connections
    opening = _group_sockets.Opening()
    init_process_group()
    _connections = opening.opened()


def subgroup(make):
    """`make()`'s group (a subgroup of the current one; or what a state function makes on the
    round's group, with the subgroups of its mesh), its connections shut down with the current
    group's when the round is left."""
    opening = _group_sockets.Opening()
    group = make()
    _connections.update(opening.opened())
    return group


def new_group(backend, round_):
    """A survivor's broken group abandoned; init_process_group on the round's store."""
    dist = _dist()
    abandon_group()
    _, store = round_store(round_)
    _init(lambda: dist.init_process_group(backend, store=store, rank=int(os.environ["RANK"]),
                                          world_size=int(os.environ["WORLD_SIZE"]),
                                          timeout=TIMEOUT))
    return "new group"


def plan(hellos):
    """From every rank's hello ({"pg": the store its group lives on or "", "hosts": that store's
    address if this process hosts it, else ""}), in rank order: the store every rank's group
    will live on, and whether the survivors keep theirs ("reconfigure") or all start anew
    ("new group", on the round's own store: returns None for it)."""
    hosted = [h["hosts"] for h in hellos if h["hosts"]]
    if not hosted:
        return None
    store = hosted[0]
    if any(h["pg"] and h["pg"] != store for h in hellos):
        return None
    return store


def claimed_store(mine, round_address, hosted_here, agent_store, listening):
    """The store this rank's group lives on ("host:port", `mine`) when the round's other ranks can
    reach it, else "": it is there when this process hosts it, or when an agent does (it keeps an
    earlier round's store while clients use it) at another address than the round's (on the same
    one, a fixed --master_port, the round's store took the port over and the earlier one is
    closed) and it still accepts connections (the node whose agent hosted it may be the one
    lost). `listening(address)` says whether it does."""
    if not mine:
        return ""
    if hosted_here:
        return mine
    if agent_store and mine != round_address and listening(mine):
        return mine
    return ""


def _reconfigurable_group(backend, base, address):
    """This rank's group made with enable_reconfigure on `base`, the store at `address`."""
    global _pg_store
    dist = _dist()
    _init(lambda: dist.init_process_group(
        backend, store=dist.PrefixStore(PG_PREFIX, base), rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]), timeout=TIMEOUT, enable_reconfigure=True))
    _pg_store = address


def reconfigure(backend, round_):
    """The round's group through `_reconfigure`: survivors keep theirs when the store it lives on
    survives; otherwise every rank makes a new reconfigurable group on the round's store. Returns
    "reconfigured" or "new group"."""
    dist = _dist()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    base, store = round_store(round_)
    mine = _pg_store if dist.is_initialized() else None
    hosts = claimed_store(mine, _address(), mine in _STORES, _agent_store(), _listening)
    store.set(f"hello/{rank}", json.dumps({"pg": mine or "", "hosts": hosts}))
    hellos = [json.loads(store.get(f"hello/{r}")) for r in range(world)]
    target = plan(hellos)
    if target is None:  # the store is gone (or never was): a new group on the round's store
        abandon_group()
        _reconfigurable_group(backend, base, _address())
        how = "new group"
    else:
        if mine is None:  # a new rank joins the group that lives on `target`
            on = base if target == _address() else _store_at(target, target in _STORES)
            _reconfigurable_group(backend, on, target)
        how = "reconfigured"
    store.set(f"handle/{rank}", dist._get_reconfigure_handle())
    handles = [store.get(f"handle/{r}").decode() for r in range(world)]
    # One uuid per communicator on that store: the round is new every time.
    dist._reconfigure(uuid=round_ + 1, handles=handles, timeout=TIMEOUT).wait()
    return how
