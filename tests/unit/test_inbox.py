"""The run's inbox (`workflows.inbox`): what clients send a running session, held until
the loop takes it at a boundary.

Steering and follow-ups queue in order and drain one at a time or all at once, as the
session's queue modes say; a message sent twice (a retried call) queues once, and still
does after the run continues as new; config changes apply to what getters return at
once and become writes for the next save point; guidance interrupts if any item does.
"""

from __future__ import annotations

import pytest

from duragent.domain.changes import ConfigChange, SessionChange
from duragent.domain.config import SessionConfig
from duragent.domain.entries import MessageEntry, ModelChangeEntry
from duragent.domain.guidance import GuidanceIntent, GuidanceItem
from duragent.domain.messages import user_text
from duragent.domain.queues import QueuedMessage
from duragent.domain.save_points import QueueConsumption
from duragent.workflows.inbox import SEEN_CARRIED, Inbox, queued_entries

pytestmark = pytest.mark.fast


def message(item_id: str, text: str | None = None) -> QueuedMessage:
    return QueuedMessage(id=item_id, message=user_text(text or item_id, timestamp=1))


def guidance(item_id: str, intent: GuidanceIntent) -> GuidanceItem:
    return GuidanceItem(id=item_id, text=item_id, intent=intent)


def texts(items: list[QueuedMessage]) -> list[str]:
    return [item.text for item in items]


def test_without_a_config_queues_drain_one_at_a_time() -> None:
    inbox = Inbox()
    for name in ("s1", "s2"):
        inbox.steer(message(name))
    inbox.follow_up(message("f1"))
    assert texts(inbox.take_steering()) == ["s1"]
    assert texts(inbox.take_steering()) == ["s2"]
    assert inbox.take_steering() == []
    assert texts(inbox.take_follow_ups()) == ["f1"]


def test_queue_modes_all_take_everything_in_order() -> None:
    inbox = Inbox()
    inbox.config = SessionConfig(model="claude-a", steering_mode="all", follow_up_mode="all")
    for name in ("s1", "s2", "s3"):
        inbox.steer(message(name))
    for name in ("f1", "f2"):
        inbox.follow_up(message(name))
    assert texts(inbox.take_steering()) == ["s1", "s2", "s3"]
    assert texts(inbox.take_follow_ups()) == ["f1", "f2"]


def test_a_message_sent_twice_queues_once_across_both_queues() -> None:
    inbox = Inbox()
    inbox.steer(message("m1"))
    inbox.steer(message("m1"))
    inbox.follow_up(message("m1"))  # the same sender id, resent as a follow-up
    assert texts(inbox.steering) == ["m1"] and inbox.follow_ups == []
    inbox.take_steering()
    inbox.steer(message("m1"))  # even once it was taken
    assert inbox.steering == []


def test_guidance_intent_interrupts_if_any_item_does() -> None:
    inbox = Inbox()
    assert inbox.guidance_intent() is None
    inbox.guide(guidance("g1", "supplement"))
    assert inbox.guidance_intent() == "supplement"
    inbox.guide(guidance("g2", "interrupt"))
    assert inbox.guidance_intent() == "interrupt"
    assert [item.id for item in inbox.take_guidance()] == ["g1", "g2"]
    assert inbox.guidance_intent() is None and inbox.take_guidance() == []


def test_guidance_records_when_it_arrived_and_is_deduplicated() -> None:
    inbox = Inbox()
    inbox.activity = "model"
    inbox.guide(guidance("g1", "supplement"))
    inbox.activity = "tools"
    inbox.guide(guidance("g1", "interrupt"))  # resent: ignored, its first arrival stays
    inbox.guide(guidance("g2", "supplement"))
    assert [(item.id, item.intent) for item in inbox.guidance] == [
        ("g1", "supplement"),
        ("g2", "supplement"),
    ]
    assert inbox.arrivals == {"g1": "model", "g2": "tools"}


def test_a_config_change_applies_at_once_and_waits_for_the_save_point() -> None:
    inbox = Inbox()
    inbox.config = SessionConfig(model="claude-a")
    change = SessionChange(
        id="c1", config=ConfigChange(model="claude-next", steering_mode="all"), timestamp=5
    )
    inbox.change(change)
    inbox.change(change)  # a retried call applies once
    assert inbox.config.model == "claude-next" and inbox.config.steering_mode == "all"
    (entry,) = inbox.pending_writes
    assert isinstance(entry, ModelChangeEntry) and entry.model == "claude-next"
    writes, session_config = inbox.take_writes()
    assert writes == [entry] and session_config == inbox.config  # steering mode: session-wide
    assert inbox.take_writes() == ([], None)


def test_taken_writes_stay_in_sight_until_their_save_point_finishes() -> None:
    """A status read during a save point finds a write either among the run's unsaved
    writes or in the store, never in neither."""
    inbox = Inbox()
    inbox.config = SessionConfig(model="claude-a")
    inbox.change(SessionChange(id="c1", config=ConfigChange(model="claude-b"), timestamp=5))
    (first,) = inbox.unsaved_writes()
    inbox.take_writes()
    inbox.change(SessionChange(id="c2", config=ConfigChange(model="claude-c"), timestamp=6))
    (second,) = inbox.pending_writes
    assert inbox.unsaved_writes() == [first, second]
    inbox.writes_saved()
    assert inbox.unsaved_writes() == [second]


def test_a_branch_scoped_change_leaves_the_session_config_alone() -> None:
    inbox = Inbox()
    inbox.config = SessionConfig(model="claude-a")
    inbox.change(SessionChange(id="c1", config=ConfigChange(model="claude-next"), timestamp=5))
    writes, session_config = inbox.take_writes()
    assert len(writes) == 1 and session_config is None


def test_export_and_restore_keep_everything_held() -> None:
    inbox = Inbox()
    inbox.config = SessionConfig(model="claude-a", follow_up_mode="all")
    inbox.steer(message("s1"))
    inbox.follow_up(message("f1"))
    inbox.activity = "tools"
    inbox.guide(guidance("g1", "interrupt"))
    inbox.change(SessionChange(id="c1", config=ConfigChange(max_tokens=100), timestamp=5))
    restored = Inbox.restore(inbox.export())
    assert texts(restored.steering) == ["s1"] and texts(restored.follow_ups) == ["f1"]
    assert restored.guidance == inbox.guidance and restored.arrivals == {"g1": "tools"}
    assert restored.config == inbox.config
    assert restored.take_writes() == inbox.take_writes()
    restored.steer(message("s1"))  # still recognised as sent
    restored.steer(message("c1"))
    assert texts(restored.steering) == ["s1"]


def test_export_carries_only_the_most_recent_ids() -> None:
    inbox = Inbox()
    for number in range(SEEN_CARRIED + 5):
        inbox.steer(message(f"m{number}"))
        inbox.take_steering()
    seen = inbox.export().seen
    assert len(seen) == SEEN_CARRIED and seen[-1] == f"m{SEEN_CARRIED + 4}"


def test_clear_queues_hands_back_what_was_never_delivered() -> None:
    inbox = Inbox()
    inbox.steer(message("s1"))
    inbox.follow_up(message("f1"))
    steering, follow_ups = inbox.clear_queues()
    assert (texts(steering), texts(follow_ups)) == (["s1"], ["f1"])
    assert inbox.steering == inbox.follow_ups == []


def test_queued_entries_keep_the_senders_ids() -> None:
    made, consumed = queued_entries([message("m1", "hello"), message("m2")], "follow_up")
    assert [e.id for e in made] == ["m1", "m2"]
    assert all(isinstance(e, MessageEntry) and e.parent_id is None for e in made)
    assert consumed == [
        QueueConsumption(entry_id="m1", queue="follow_up"),
        QueueConsumption(entry_id="m2", queue="follow_up"),
    ]
