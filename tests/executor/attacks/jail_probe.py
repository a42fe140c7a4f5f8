"""Describe the state of the jail this program runs in, one fact per line.

Run inside the sandbox after an attack: on a fresh jail the output is always the same, so
any difference means an earlier test left something behind (a file outside the wiped
directories, a process, a SysV IPC object, a changed resource limit of the jail's own
processes). Stdlib only; it must not depend on its own pid, uid or resource limits.
"""

import os

me = os.getpid()
lines = []
for directory in ("/", "/usr", "/usr/lib", "/dev", "/dev/shm", "/tmp"):
    lines.append(directory + ": " + " ".join(sorted(os.listdir(directory))))
for top in ("/tmp", "/dev/shm"):
    for root, dirs, files in os.walk(top):
        lines.append("walk " + root + ": " + " ".join(sorted(dirs + files)))
for mount in ("/", "/tmp", "/dev/shm", "/dev"):
    st = os.statvfs(mount)
    lines.append(f"statvfs {mount} blocks_free={st.f_bfree} inodes_free={st.f_ffree}")
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    if pid == me:
        continue
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read()[:48]
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
        # The init's stat is masked (empty) against side channels.
        state = text.rsplit(")", 1)[1].split()[0] if text else "masked"
    except OSError:
        continue
    # Running or sleeping varies with timing; stopped, traced or zombie does not.
    state = {"R": "alive", "S": "alive", "D": "alive", "I": "alive"}.get(state, state)
    lines.append(f"proc {pid} {state} {cmdline!r}")
for kind in ("shm", "msg", "sem"):
    with open("/proc/sysvipc/" + kind) as fh:
        lines.append(f"sysv {kind} objects={len(fh.read().splitlines()) - 1}")
# The zygote (the jail's init) must keep its own resource limits whatever a test did.
with open("/proc/1/limits") as fh:
    lines += ["init limit " + " ".join(line.split()) for line in fh.read().splitlines()[1:]]
print("\n".join(lines))
