"""Real PyTorch TCPStore clients against a store server they did not start (mxrun's, in
tests/integration/store_server_test.cc): every operation of torch.distributed.TCPStore, and what
init_process_group does with TORCHELASTIC_USE_AGENT_STORE=True. Each mode asserts what PyTorch's own
server answers, prints one "ok: ..." line per check and exits 0; any difference raises.

    store_clients.py ops HOST PORT            every operation, from one client and a second one
    store_clients.py waiters HOST PORT N      N clients wait on one key, one BARRIER of N + 1
    store_clients.py large HOST PORT          8 MiB values, 20,000 keys in one MULTI_SET/GET
    store_clients.py hold HOST PORT KEY       waits on KEY until killed (a client that vanishes)
    store_clients.py group HOST PORT RANK N   init_process_group(gloo) on the agent's store
"""

import datetime
import os
import sys
import threading

import torch
import torch.distributed as dist


def client(host, port, timeout=30.0, world_size=None):
    return dist.TCPStore(host, port, world_size=world_size, is_master=False,
                         timeout=datetime.timedelta(seconds=timeout))


def ok(what):
    print("ok: " + what, flush=True)


def expect_raises(what, call):
    try:
        call()
    except (RuntimeError, dist.DistError) as error:  # DistStoreError, DistQueueEmptyError, ...
        ok(what + " raises " + type(error).__name__)
        return
    raise AssertionError(what + " did not raise")


def ops(host, port):
    # world_size given: the client ADDs "init/" as it connects, as PyTorch's clients do.
    store = client(host, port, world_size=1)
    other = client(host, port)
    ok("connect (VALIDATE, PING, ADD init/)")

    store.set("a", "1")
    assert store.get("a") == b"1"
    store.set("a", b"\x00binary\xff")
    assert other.get("a") == b"\x00binary\xff"
    ok("set/get, overwrite, binary values, seen by a second client")

    assert store.add("n", 5) == 5
    assert other.add("n", -7) == -2
    assert store.add("n", 0) == -2
    assert store.get("n") == b"-2"
    ok("add: from 0, negative, decimal text")

    assert store.check(["a", "n"])
    assert not store.check(["a", "missing"])
    assert store.check([])
    ok("check")

    store.wait(["a", "n"])
    expect_raises("wait on a missing key, 0.3 s",
                  lambda: store.wait(["missing"], datetime.timedelta(seconds=0.3)))
    assert store.get("a") == b"\x00binary\xff"
    ok("wait: present keys at once; the client works on after its cancelled wait")

    def set_later():
        other.set("late", "here")
    timer = threading.Timer(0.3, set_later)
    timer.start()
    store.wait(["late", "a"], datetime.timedelta(seconds=20))
    timer.join()
    assert store.get("late") == b"here"
    ok("wait: released by another client's set")

    assert store.compare_set("cs", "", "first") == b"first"
    assert store.compare_set("cs", "wrong", "second") == b"first"
    assert store.compare_set("cs", "first", "second") == b"second"
    assert store.compare_set("cs-missing", "expected", "x") == b"expected"
    assert not store.check(["cs-missing"])
    ok("compare_set: missing and empty, mismatch, match, missing and not empty")

    store.append("ap", "x")
    store.append("ap", b"yz")
    assert store.get("ap") == b"xyz"
    ok("append: creates, then appends")

    store.multi_set(["m1", "m2", "m3"], ["one", "two", b"three"])
    assert store.multi_get(["m3", "m1", "m2"]) == [b"three", b"one", b"two"]
    ok("multi_set/multi_get, in request order")

    keys_before = store.num_keys()
    listed = store.list_keys()
    for key in ["a", "n", "late", "cs", "ap", "m1", "m2", "m3"]:
        assert key in listed, (key, listed)
    assert "init/" not in listed  # the client hides the keys it did not prefix
    assert keys_before == len(listed) + 1, (keys_before, listed)  # init/ is counted
    ok("num_keys and list_keys")

    assert store.delete_key("m1")
    assert not store.delete_key("m1")
    assert store.num_keys() == keys_before - 1
    expect_raises("get of a deleted key, 0.3 s timeout",
                  lambda: client(host, port, timeout=0.3).get("m1"))
    ok("delete_key")

    store.queue_push("q", "first")
    store.queue_push("q", b"second")
    assert store.queue_len("q") == 2
    assert other.queue_pop("q") == b"first"
    assert store.queue_pop("q", False) == b"second"
    assert store.queue_len("q") == 0
    expect_raises("queue_pop(block=False) of an empty queue",
                  lambda: store.queue_pop("q", False))

    def push_later():
        other.queue_push("q", "pushed")
    timer = threading.Timer(0.3, push_later)
    timer.start()
    assert store.queue_pop("q") == b"pushed"  # blocks on the queue's key until the push
    timer.join()
    ok("queue_push/queue_len/queue_pop, blocking and not")

    done = []

    def arrive():
        other.barrier("bar", 2, datetime.timedelta(seconds=20))
        done.append(1)
    thread = threading.Thread(target=arrive)
    thread.start()
    store.barrier("bar", 2, datetime.timedelta(seconds=20))
    thread.join()
    assert done == [1]
    assert store.get("bar") == b"2"
    expect_raises("a barrier no one else reaches, 0.3 s",
                  lambda: store.barrier("bar-alone", 2, datetime.timedelta(seconds=0.3)))
    ok("barrier: two arrive; one alone times out")

    clone = store.clone()
    assert clone.get("cs") == b"second"
    ok("clone: a new connection")
    print("all operations passed", flush=True)


def waiters(host, port, count):
    stores = [client(host, port) for _ in range(count)]
    released = []
    lock = threading.Lock()

    def wait(store):
        store.wait(["go"], datetime.timedelta(seconds=60))
        with lock:
            released.append(1)
    threads = [threading.Thread(target=wait, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    setter = client(host, port)
    setter.set("go", "1")
    for thread in threads:
        thread.join()
    assert len(released) == count
    ok(f"{count} clients waiting on one key released by one set")

    arrivals = []

    def arrive(store):
        store.barrier("everyone", count + 1, datetime.timedelta(seconds=60))
        with lock:
            arrivals.append(1)
    threads = [threading.Thread(target=arrive, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    setter.barrier("everyone", count + 1, datetime.timedelta(seconds=60))
    for thread in threads:
        thread.join()
    assert len(arrivals) == count
    ok(f"a barrier of {count + 1} clients")
    print("waiters passed", flush=True)


def large(host, port):
    store = client(host, port)
    big = os.urandom(8 * 1024 * 1024)
    store.set("big", big)
    assert store.get("big") == big
    ok("an 8 MiB value")
    keys = [f"k{i}" for i in range(20000)]
    values = [f"v{i}".encode() * 3 for i in range(20000)]
    store.multi_set(keys, values)
    assert store.multi_get(keys) == values
    ok("20,000 keys in one multi_set and one multi_get")
    print("large passed", flush=True)


def hold(host, port, key):
    store = client(host, port)
    print("holding", flush=True)
    store.wait([key], datetime.timedelta(seconds=120))
    print("released", flush=True)


def group(host, port, rank, world):
    os.environ.update({"MASTER_ADDR": host, "MASTER_PORT": str(port), "RANK": str(rank),
                       "WORLD_SIZE": str(world), "TORCHELASTIC_USE_AGENT_STORE": "True"})
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    assert value.item() == world * (world + 1) / 2, value
    sub = dist.new_group([0, 1])
    value = torch.tensor([1.0])
    dist.all_reduce(value, group=sub)
    assert value.item() == 2.0
    dist.barrier()
    objects = [None]
    if rank == 0:
        objects = [{"from": 0}]
    dist.broadcast_object_list(objects, src=0)
    assert objects == [{"from": 0}]
    dist.destroy_process_group()
    ok(f"rank {rank}: init_process_group, all_reduce, new_group, barrier, broadcast_object_list")


def main(argv):
    mode, host, port = argv[1], argv[2], int(argv[3])
    if mode == "ops":
        ops(host, port)
    elif mode == "waiters":
        waiters(host, port, int(argv[4]))
    elif mode == "large":
        large(host, port)
    elif mode == "hold":
        hold(host, port, argv[4])
    elif mode == "group":
        group(host, port, int(argv[4]), int(argv[5]))
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main(sys.argv)
