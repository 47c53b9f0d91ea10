"""The TCP connections a process group opened, so that leaving the group can close them.

A survivor that leaves a broken Gloo group keeps the group object (its destructor could hang on a
dead peer), so its connections stay open. Another survivor still blocked in the same collective,
waiting on this one rather than on the dead peer, would then wait for the group's timeout (30
min) while this one waits for it in the next round: seen with the 2 survivors of a lost node, 1
run in 5 on a loaded machine. Shutting this process's connections of the old group down ends that
wait at once ("Connection closed by peer"), as a dead peer's do; Gloo's abort cannot (it is a
no-op for a blocked collective on PyTorch 2.13 and 2.14). Listening sockets are left alone (a
TCPStore server may serve the next round). The connections are told apart by being opened while
init_process_group ran.
"""
import os
import socket


def _socket_fds():
    """{inode: fd} of this process's sockets."""
    found = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for name in names:
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            found[int(link[8:-1])] = int(name)
    return found


class Opening:
    """Notes the sockets there are now; `opened()` names those made since."""

    def __init__(self):
        self._before = set(_socket_fds())

    def opened(self):
        return set(_socket_fds()) - self._before


def shut_down(inodes):
    """Shuts down the connected TCP sockets among `inodes` (both directions). Returns how many."""
    done = 0
    for inode, fd in _socket_fds().items():
        if inode not in inodes:
            continue
        try:
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if (s.family in (socket.AF_INET, socket.AF_INET6) and s.type == socket.SOCK_STREAM
                    and not s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)):
                s.shutdown(socket.SHUT_RDWR)
                done += 1
        except OSError:
            pass  # not connected, or already closed
        finally:
            s.close()  # the duplicate only
    return done
