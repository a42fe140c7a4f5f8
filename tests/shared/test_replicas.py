"""Replica lists (`cobalt.shared.replicas`) and the published-policy record."""

from __future__ import annotations

from pathlib import Path

import pytest

from cobalt.shared.checkpoints import (
    PUBLISHED_FILE,
    PublishedPolicy,
    read_published,
    write_published,
)
from cobalt.shared.replicas import expand_replicas, split_replicas


def test_plain_urls_stay_as_they_are_and_dns_names_become_one_url_per_address() -> None:
    asked: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return ["10.0.0.7", "10.0.0.9", "fd00::1"] if host == "replicas" else []

    urls = expand_replicas(
        ["http://a:8000/", "dns+http://replicas:8000/v1", "dns+http://nobody:8000"],
        resolve=resolve,
    )
    assert urls == [
        "http://a:8000",
        "http://10.0.0.7:8000/v1",
        "http://10.0.0.9:8000/v1",
        "http://[fd00::1]:8000/v1",
    ]
    assert asked == [("replicas", 8000), ("nobody", 8000)]


def test_a_name_that_does_not_resolve_is_no_replica_and_a_bad_entry_is_refused() -> None:
    def fail(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    assert expand_replicas(["dns+http://gone:8000"], resolve=fail) == []
    with pytest.raises(ValueError, match="needs a host name"):
        expand_replicas(["dns+http://:8000"])
    assert split_replicas(" http://a:1, ,http://b:2 ") == ["http://a:1", "http://b:2"]


def test_the_published_record_round_trips_and_rejects_nonsense(tmp_path: Path) -> None:
    assert read_published(tmp_path) is None
    record = PublishedPolicy(job=3, version=7, step=4, path="/c/job-3/step-4/policy")
    write_published(tmp_path / "root", record)
    assert read_published(tmp_path / "root") == record
    assert [p.name for p in (tmp_path / "root").iterdir()] == [PUBLISHED_FILE]
    (tmp_path / PUBLISHED_FILE).write_text('{"job": 1}')
    with pytest.raises(ValueError, match="not a published-policy record"):
        read_published(tmp_path)
