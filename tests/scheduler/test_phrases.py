"""Reasons that name moments are kept as times and worded by the clock that shows them: the simulator's log names
the moment, the live server counts down to it, a forecast's line gives the time of day."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from flexq.scheduler import (
    COUNTDOWNS,
    NAMED_MOMENTS,
    TIMES_OF_DAY,
    Event,
    EventKind,
    Moment,
    MomentForm,
    Phrase,
    Text,
    TimeWords,
    worded,
)

NOW = datetime(2026, 1, 1, 10, 0, tzinfo=UTC).timestamp()
READY = NOW + 330.0  # 10:05:30
BOOTING = Phrase(("waiting for 2 node(s) of od-pool to boot", Moment(READY, MomentForm.ASIDE, "ready")))
FREES = Phrase(("waits for room; a slice frees ", Moment(READY, MomentForm.AFTER_VERB)))
SOONER = Phrase(("it finishes sooner where it runs (", Moment(READY), ") than moved (", Moment(READY + 60), ")"))

T = f"t={int(READY) // 86400}d10h5m30s"  # the simulator names a moment by its time on the clock
T2 = f"t={int(READY) // 86400}d10h6m30s"
WORDED: dict[tuple[str, str], str] = {
    ("booting", "named"): f"waiting for 2 node(s) of od-pool to boot (ready at {T})",
    ("booting", "countdown"): "waiting for 2 node(s) of od-pool to boot",
    ("booting", "time of day"): "waiting for 2 node(s) of od-pool to boot (ready at 10:05:30Z)",
    ("frees", "named"): f"waits for room; a slice frees at {T}",
    ("frees", "countdown"): "waits for room; a slice frees in 5m30s",
    ("frees", "time of day"): "waits for room; a slice frees at 10:05:30Z",
    ("sooner", "named"): f"it finishes sooner where it runs ({T}) than moved ({T2})",
    ("sooner", "countdown"): "it finishes sooner where it runs (in 5m30s) than moved (in 6m30s)",
    ("sooner", "time of day"): "it finishes sooner where it runs (10:05:30Z) than moved (10:06:30Z)",
}
PHRASES = {"booting": BOOTING, "frees": FREES, "sooner": SOONER}
WORDS: dict[str, TimeWords] = {"named": NAMED_MOMENTS, "countdown": COUNTDOWNS, "time of day": TIMES_OF_DAY}


def test_every_phrase_in_every_clocks_words() -> None:
    assert set(WORDED) == {(p, w) for p in PHRASES for w in WORDS}, "the table names every pair, no other"
    got = {(p, w): worded(PHRASES[p], WORDS[w], NOW) for p, w in WORDED}
    assert got == WORDED


def test_plain_text_is_its_own_words() -> None:
    for words in WORDS.values():
        assert worded("Waiting in the ClusterQueue's queue", words, NOW) == "Waiting in the ClusterQueue's queue"


def test_phrases_join_text_and_phrases_in_order() -> None:
    joined: Text = "racing: " + BOOTING + "; " + ("dws: " + FREES)
    assert isinstance(joined, Phrase)
    assert joined.moments == (READY, READY)
    assert worded(joined, NAMED_MOMENTS, NOW) == (f"racing: waiting for 2 node(s) of od-pool to boot (ready at {T}); "
                                                 f"dws: waits for room; a slice frees at {T}")
    assert SOONER.moments == (READY, READY + 60)
    assert not Phrase(()) and Phrase(("x",))


@pytest.mark.parametrize("words", sorted(WORDS))
def test_an_event_keeps_its_phrase_until_its_clock_words_it(words: str) -> None:
    event = Event.told(NOW, EventKind.PROVISIONING_REQUEST, "default/a", "cq", FREES, extra={"request": "r"})
    assert event.reason == "" and event.phrase == FREES and event.extra == {"request": "r"}
    said = event.worded(WORDS[words])
    assert said.reason == WORDED[("frees", words)] and said.phrase is None
    assert said.to_json()["reason"] == said.reason and "phrase" not in said.to_json()
    plain = Event.told(NOW, EventKind.PENDING, "default/a", "cq", "no quota")
    assert plain.reason == "no quota" and plain.phrase is None and plain.worded(WORDS[words]) is plain


@dataclasses.dataclass(frozen=True)
class _Request:
    request: str

    def fields(self) -> dict[str, str]:
        return {"request": self.request}


@pytest.mark.parametrize("reason", [FREES, "no quota"], ids=["phrase", "text"])
def test_an_event_told_with_a_payload_keeps_it_and_logs_its_fields(reason: Text) -> None:
    payload = _Request("r")
    event = Event.told(NOW, EventKind.PROVISIONING_REQUEST, "default/a", "cq", reason, extra={"ignored": 1},
                       payload=payload)
    assert (event.t, event.kind, event.workload, event.cluster_queue) == (
        NOW, EventKind.PROVISIONING_REQUEST, "default/a", "cq")
    assert event.payload is payload and event.extra == {"request": "r"}, "the payload's fields, not extra"
    assert (event.reason, event.phrase) == (("", FREES) if isinstance(reason, Phrase) else ("no quota", None))


def test_the_time_of_day_is_utc_whatever_the_machines_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "IST-5:30")  # a POSIX zone: no time zone database needed
    time.tzset()
    try:
        assert worded(FREES, TIMES_OF_DAY, NOW) == "waits for room; a slice frees at 10:05:30Z"
    finally:
        monkeypatch.undo()
        time.tzset()
