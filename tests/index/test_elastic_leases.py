"""A build's leases against the fake cluster: a holder cut off from its lease fences itself, a
lease write whose answer was lost is still the holder's, and publishing bounds its wait and
moves no alias back to an older build (the live node's test stops a real worker:
tests/index/test_elastic_integration.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import pytest
from elastic_transport import ConnectionTimeout

from feverous_es.errors import StoreError
from feverous_es.index.dump.wiki import Part
from feverous_es.index.elastic.builds import wait_for_replicas
from feverous_es.index.elastic.leases import Lease, LeaseLost
from feverous_es.index.elastic.loader import bulk_load, chunk_actions, swap_aliases
from feverous_es.index.elastic.writer import ElasticWriter
from tests.elastic_fake import FakeCluster, Index, Request
from tests.index.test_elastic_build import CONFIG as BUILD_CONFIG
from tests.index.test_elastic_build import DIM, V1, make_chunk
from tests.index.test_elastic_real_node import CONFIG

PROGRESS = "progress"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def cluster_with_progress() -> FakeCluster:
    fake = FakeCluster()
    fake.indices[PROGRESS] = Index(mappings={}, settings={})
    return fake


def test_a_holder_whose_lease_writes_stopped_fences_itself_at_half_the_lease() -> None:
    fake, clock = cluster_with_progress(), Clock()
    lease = Lease(fake.client(), PROGRESS, "1", "part 1/2", seconds=60, clock=clock)
    lease.take({"next_seq": 0})
    clock.now += 29  # renewals failed (or the process was stopped) for under half the lease
    lease.fence()
    clock.now += 2
    with pytest.raises(LeaseLost, match="last renewed 31 s ago"):
        lease.fence()
    assert not lease.fenced_in()
    lease.write({"next_seq": 1})  # a renewal that lands lets it write again
    lease.fence()


def test_a_lease_write_applied_whose_answer_was_lost_is_still_the_holders() -> None:
    fake = cluster_with_progress()
    lease = Lease(fake.client(), PROGRESS, "1", "part 1/2", seconds=60)
    lease.take({"next_seq": 0})
    lost = []

    def apply_then_time_out(request: Request) -> None:
        if request.method == "PUT" and request.path.endswith("/_doc/1") and not lost:
            lost.append(fake._doc(request, PROGRESS, "1"))  # applied, the answer lost
            raise ConnectionTimeout("timed out")
        return None

    fake.handlers.append(apply_then_time_out)
    with pytest.raises(StoreError, match="did not take the lease's write within 15 s"):
        lease.write({"next_seq": 1})
    sent = [r.params.get("if_seq_no") for r in fake.requests_to("PUT", ".*/_doc/1")]
    assert sent == [None, "0"]  # the take (create-only), then the write once: no blind retry
    lease.write({"next_seq": 2})  # a 409 on the old version: its own write, not another's
    assert not lease.lost and fake.indices[PROGRESS].docs["1"]["next_seq"] == 2
    thief = Lease(fake.client(), PROGRESS, "1", "part 1/2", seconds=60)
    thief._version, thief._written_at = {"if_seq_no": 9, "if_primary_term": 1}, 0.0
    with pytest.raises(LeaseLost, match="taken over"):
        thief.write({"next_seq": 3})  # a 409 on a document another holds: lost


def test_a_part_writer_cut_off_from_its_lease_stops_before_sending_data() -> None:
    fake = FakeCluster()
    config = replace(CONFIG, lease_seconds=1)
    writer = ElasticWriter(config, DIM, client=fake.client(), part=Part.parse("1/2"))
    try:
        writer.write(make_chunk(0, ["A"]))
        # The cluster stops taking the lease's renewals; data requests would still go through.
        fake.handlers.append(
            lambda r: (503, {"error": "unavailable"}) if "/_doc/" in r.path else None
        )
        bulks = len(fake.requests_to("PUT", "/_bulk"))
        assert bulks > 0
        wait_until(lambda: not writer._lease.fenced_in(), seconds=5)
        with pytest.raises(LeaseLost, match="stops without writing more"):
            writer.write(make_chunk(1, ["B"]))
        assert len(fake.requests_to("PUT", "/_bulk")) == bulks  # no data sent, nothing deleted
    finally:
        fake.handlers.clear()
        writer.close()


def test_a_fence_is_checked_before_every_bulk_request() -> None:
    """A holder may be stopped between two requests of one load: each request asks the fence
    first, so a holder that lost its hold mid-load sends nothing more."""
    fake = FakeCluster()
    fake.indices["docs"] = Index(mappings={}, settings={})
    asked = []

    def fence() -> None:
        asked.append(len(fake.requests_to("PUT", "/_bulk")))
        if len(asked) > 2:
            raise LeaseLost("part 1/2: this worker's hold was last renewed 40 s ago")

    config = replace(BUILD_CONFIG, bulk_workers=1)
    actions = ({"_index": "docs", "_id": str(n), "_source": {"n": n}} for n in range(20))
    with pytest.raises(LeaseLost, match="40 s ago"):
        bulk_load(fake.client(), actions, config, fence=fence)
    assert asked == [0, 1, 2] and len(fake.requests_to("PUT", "/_bulk")) == 2


def test_a_discard_leaves_what_was_rewritten_since_it_read_it() -> None:
    """Deletes are conditioned on the sequence number the scroll read: a document another
    worker wrote again under the same id meanwhile answers 409 and stays."""
    fake = FakeCluster()
    writer = ElasticWriter(BUILD_CONFIG, DIM, client=fake.client())
    writer.write(make_chunk(0, ["A"]))
    stale = list(chunk_actions(make_chunk(1, ["B"]), V1, writer.state()))
    fake.client().bulk(operations=[line for a in stale for line in (
        {"index": {"_index": a["_index"], "_id": a["_id"]}}, a["_source"])])  # fmt: skip
    rewritten = stale[0]

    def rewrite_before_the_deletes(request: Request) -> None:
        if request.path == "/_bulk" and "delete" in request.body[0]:
            fake._bulk([{"index": {"_index": rewritten["_index"], "_id": rewritten["_id"]}},
                        rewritten["_source"]])  # fmt: skip
            fake.handlers.clear()

    fake.handlers.append(rewrite_before_the_deletes)
    writer._discard_partial()
    left = {name: set(fake.indices[name].docs) for name in V1}
    assert rewritten["_id"] in left[rewritten["_index"]]
    assert all(a["_id"] not in left[a["_index"]] for a in stale[1:])
    writer.close()


def test_publishing_blocks_writes_before_it_counts() -> None:
    """No late request of a stale worker can change the build between its count and its
    publication: writes are blocked first."""
    fake = FakeCluster()
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    writer.write(make_chunk(0, ["A"]))
    writer.finish()
    paths = [r.path for r in fake.requests]
    blocked = next(i for i, r in enumerate(fake.requests) if r.path.endswith("/_settings")
                   and r.body["index"].get("blocks.write") is True)  # fmt: skip
    counted = [i for i, path in enumerate(paths) if path.endswith("/_count")]
    assert counted and blocked < counted[0]


def test_publishing_moves_no_alias_back_and_bounds_its_wait() -> None:
    fake = FakeCluster()
    for version in (1, 2):
        fake.indices[f"feverous-elements-v{version}"] = Index(mappings={}, settings={})
    swap_aliases(fake.client(), {"feverous-elements": "feverous-elements-v2"})
    with pytest.raises(StoreError, match="a later build than feverous-elements-v1"):
        swap_aliases(fake.client(), {"feverous-elements": "feverous-elements-v1"})
    assert fake.indices["feverous-elements-v2"].aliases == {"feverous-elements"}
    fake.handlers.append(
        lambda r: (408, {"status": "yellow", "timed_out": True, "unassigned_shards": 3})
        if r.path.startswith("/_cluster/health/") else None
    )  # fmt: skip
    with pytest.raises(StoreError, match=r"not green after .* 3 unassigned.*aliases are unchanged"):
        wait_for_replicas(fake.client(), ["feverous-elements-v2"], 0, limit=0.0)


def test_a_published_build_takes_no_more_writes() -> None:
    fake = FakeCluster()
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    writer.write(make_chunk(0, ["A"]))
    writer.finish()
    for name in ("feverous-elements-v1", "feverous-pages-v1", "feverous-tables-v1"):
        assert fake.indices[name].settings["blocks.write"] is True


def wait_until(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)
