"""Describe the state of the jail this program runs in, one fact per line.

Run inside the sandbox after an attack: on a fresh jail the output is always the same, so
any difference means an earlier test left something behind (a file outside the wiped
directories, a process, a SysV IPC object, a changed resource limit of the jail's own
processes). Stdlib only; it must not depend on its own pid, uid or resource limits.
"""

import os
import resource

me = os.getpid()
lines = []
for directory in ("/", "/usr", "/usr/lib", "/dev", "/dev/shm", "/tmp"):
    lines.append(directory + ": " + " ".join(sorted(os.listdir(directory))))
for top in ("/tmp", "/dev/shm"):
    for root, dirs, files in os.walk(top):
        lines.append("walk " + root + ": " + " ".join(sorted(dirs + files)))
for mount in ("/", "/tmp", "/dev/shm", "/dev"):
    st = os.statvfs(mount)
    lines.append("statvfs %s blocks_free=%d inodes_free=%d" % (mount, st.f_bfree, st.f_ffree))
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    if pid == me:
        continue
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            cmdline = fh.read()[:48]
        with open("/proc/%d/stat" % pid) as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        continue
    lines.append("proc %d %s %r" % (pid, state, cmdline))
for kind in ("shm", "msg", "sem"):
    with open("/proc/sysvipc/" + kind) as fh:
        lines.append("sysv %s objects=%d" % (kind, len(fh.read().splitlines()) - 1))
for name in sorted(n for n in dir(resource) if n.startswith("RLIMIT_")):
    which = getattr(resource, name)
    try:
        init, zygote = resource.prlimit(1, which), resource.prlimit(2, which)
    except OSError as exc:
        init = zygote = "error %s" % exc.errno
    lines.append("rlimit %s init=%s zygote=%s" % (name, init, zygote))
print("\n".join(lines))
