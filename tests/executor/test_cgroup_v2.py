"""The cgroup v2 path of the per-slot cgroups, against a directory tree that mimics one.

These machines mount cgroup v1 only, so the kernel side of v2 is not exercised here (see
docs/executor.md): these tests pin down our own v2 logic, which files it writes in which
order, how it reads the OOM-kill counter and how it refuses, on a tree laid out as a
delegated cgroup2 subtree looks (systemd's `Delegate=yes`, or a container's own cgroup
namespace with the server in its root).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cobalt.executor import cgroups
from cobalt.executor.cgroups import ZYGOTE_HEADROOM_MB, ZYGOTE_PROCESSES, open_slot_cgroups
from cobalt.executor.errors import SandboxUnavailable

SERVICE = "system.slice/cobalt-executor.service"


class FakeCgroup2:
    """A cgroup2 mount as a directory tree, and a log of every write our code makes to it.

    Like the kernel, writing "+memory +pids" to a cgroup.subtree_control adds to what it
    lists, and writing a pid to a cgroup.procs moves the process there (the membership
    file then names the new cgroup); other files just take the value written.
    """

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, offered: str) -> None:
        self.root = root
        self.writes: list[tuple[str, str]] = []
        (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma\n")
        self.own = root / SERVICE
        self.own.mkdir(parents=True)
        (self.own / "cgroup.controllers").write_text(offered + "\n")
        (self.own / "cgroup.subtree_control").write_text("\n")
        (self.own / "cgroup.procs").write_text(f"{os.getpid()}\n")
        self.membership = root.parent / "proc-self-cgroup"
        self.membership.write_text(f"0::/{SERVICE}\n")
        real_write = cgroups._write

        def write(path: Path, value: str, *, missing_ok: bool = False) -> None:
            self.writes.append((str(path.relative_to(self.root)), value))
            if path.name == "cgroup.subtree_control" and path.exists():
                enabled = set(path.read_text().split())
                enabled |= {word.lstrip("+") for word in value.split()}
                value = " ".join(sorted(enabled))
            real_write(path, value, missing_ok=missing_ok)
            if path.name == "cgroup.procs" and value == "0":
                self.membership.write_text(f"0::/{path.parent.relative_to(self.root)}\n")

        monkeypatch.setattr(cgroups, "_write", write)

    def open(self, mode: cgroups.CgroupMode = "required", slots: int = 2) -> cgroups.SlotCgroups:
        return open_slot_cgroups(mode, slots, 16, root=self.root, membership=self.membership)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCgroup2:
    (tmp_path / "cgroup").mkdir()
    return FakeCgroup2(tmp_path / "cgroup", monkeypatch, offered="cpu io memory pids")


def test_the_server_moves_itself_to_a_leaf_before_it_enables_controllers(
    fake: FakeCgroup2,
) -> None:
    """No internal processes: the server's own cgroup can hand controllers to its children
    only once the server has left it. Then the pool's tree, then each slot's pids.max."""
    slot_cgroups = fake.open()
    pool = slot_cgroups.parents[0].relative_to(fake.root)
    leaf = f"{SERVICE}/cobalt-executor-{os.getpid()}-server"
    assert slot_cgroups.version == 2
    assert slot_cgroups.describe() == "cgroup-v2"
    assert pool.parent == Path(SERVICE)
    assert fake.writes == [
        (f"{leaf}/cgroup.procs", "0"),
        (f"{SERVICE}/cgroup.subtree_control", "+memory +pids"),
        (f"{pool}/cgroup.subtree_control", "+memory +pids"),
        (f"{pool}/slot0/pids.max", str(16 + ZYGOTE_PROCESSES)),
        (f"{pool}/slot1/pids.max", str(16 + ZYGOTE_PROCESSES)),
    ]
    assert [(slot.memory, slot.pids) for slot in slot_cgroups.slots] == [
        (fake.root / pool / f"slot{i}",) * 2 for i in range(2)
    ]


def test_a_second_pool_is_made_beside_the_first_not_inside_the_servers_leaf(
    fake: FakeCgroup2,
) -> None:
    first = fake.open()
    fake.writes.clear()
    second = fake.open(slots=1)
    assert second.parents[0].parent == first.parents[0].parent == fake.own
    # The controllers are delegated already: no second move, no second enabling above.
    pool = second.parents[0].relative_to(fake.root)
    assert fake.writes == [
        (f"{pool}/cgroup.subtree_control", "+memory +pids"),
        (f"{pool}/slot0/pids.max", str(16 + ZYGOTE_PROCESSES)),
    ]


def test_a_subtree_delegated_by_systemd_is_used_as_it_is(fake: FakeCgroup2) -> None:
    """With `Delegate=yes` the server already sits in a leaf and its cgroup hands memory
    and pids down: nothing is moved and nothing above the pool's tree is written."""
    (fake.own / "cgroup.subtree_control").write_text("memory pids\n")
    slot_cgroups = fake.open(slots=1)
    assert [path for path, _ in fake.writes] == [
        f"{slot_cgroups.parents[0].relative_to(fake.root)}/cgroup.subtree_control",
        f"{slot_cgroups.slots[0].pids.relative_to(fake.root)}/pids.max",
    ]


def test_the_memory_limit_goes_to_memory_max_with_no_swap(fake: FakeCgroup2) -> None:
    slot = fake.open(slots=1).slots[0]
    (slot.memory / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    fake.writes.clear()
    slot.prepare(100)
    slot.prepare(100)  # the same limit again: nothing to write
    slot.prepare(50)
    where = slot.memory.relative_to(fake.root)
    assert fake.writes == [
        (f"{where}/memory.max", str((100 + ZYGOTE_HEADROOM_MB) << 20)),
        (f"{where}/memory.swap.max", "0"),
        (f"{where}/memory.max", str((50 + ZYGOTE_HEADROOM_MB) << 20)),
        (f"{where}/memory.swap.max", "0"),
    ]


def test_oom_kills_are_read_from_memory_events(fake: FakeCgroup2) -> None:
    """v2 counts OOM kills in memory.events (`oom_kill N`; `oom` counts the times the
    limit was hit, killed or not). A test is charged only with kills since it started."""
    slot = fake.open(slots=1).slots[0]
    events = slot.memory / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 7\noom 3\noom_kill 2\noom_group_kill 0\n")
    slot.prepare(100)
    assert slot.oom_kills() == 2
    assert not slot.oom_killed_since_prepare()
    events.write_text("low 0\nhigh 0\nmax 9\noom 4\noom_kill 2\noom_group_kill 0\n")
    assert not slot.oom_killed_since_prepare(), "an OOM event without a kill is no kill"
    events.write_text("low 0\nhigh 0\nmax 9\noom 5\noom_kill 3\noom_group_kill 0\n")
    assert slot.oom_killed_since_prepare()
    slot.prepare(100)
    assert not slot.oom_killed_since_prepare()


@pytest.mark.parametrize(
    ("offered", "missing"),
    [("cpu io pids", "memory controller"), ("cpu io", "memory and pids controllers")],
)
def test_missing_controllers_are_refused_by_name_and_nothing_is_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offered: str, missing: str
) -> None:
    (tmp_path / "cgroup").mkdir()
    fake = FakeCgroup2(tmp_path / "cgroup", monkeypatch, offered=offered)
    before = sorted(fake.root.rglob("*"))
    with pytest.raises(SandboxUnavailable) as refused:
        fake.open("required")
    message = str(refused.value)
    assert f"is not given the {missing}" in message
    assert "COBALT_EXECUTOR_CGROUPS=required" in message and "Delegate=yes" in message
    assert fake.writes == []
    assert sorted(fake.root.rglob("*")) == before, "no leaf made, the server not moved"
    fallback = fake.open("auto")
    assert fallback.version is None and missing in fallback.reason
