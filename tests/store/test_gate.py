"""The store's gate (:class:`flexq.store.window.Gate`): a long batch hands it over to the threads waiting for it, each
once, and goes on as soon as they got in, not while others keep coming."""

from __future__ import annotations

import threading
import time

from flexq.store.window import Gate


def _waiting(gate: Gate, threads: int) -> None:
    deadline = time.monotonic() + 10
    while gate.waiting < threads:
        assert time.monotonic() < deadline, f"{gate.waiting} of {threads} threads wait for the gate"
        time.sleep(0.001)


def test_its_owner_holds_it_as_often_as_it_took_it() -> None:
    gate = Gate()
    with gate, gate:
        assert gate.held == 2
    assert gate.held == 0 and gate.waiting == 0


def test_a_hand_over_lets_each_waiting_thread_in_and_takes_the_gate_back() -> None:
    gate = Gate()
    order: list[str] = []

    def writer(name: str) -> None:
        with gate:
            order.append(name)

    gate.acquire()
    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    _waiting(gate, 2)
    gate.hand_over(most=30)
    order.append("owner")
    assert gate.held == 1, "the owner holds the gate again, once"
    gate.release()
    for thread in threads:
        thread.join(10)
    assert sorted(order[:2]) == ["a", "b"] and order[2] == "owner", order


def test_writers_that_keep_asking_do_not_hold_the_hand_over_up() -> None:
    """Two threads take the gate again and again, one always waiting while the other holds it (as the API's two
    writers do under load): once each got in, the owner goes on, long before ``most``."""
    gate = Gate()
    stop = threading.Event()
    rounds = {"a": 0, "b": 0}

    def busy(name: str) -> None:
        while not stop.is_set():
            with gate:
                rounds[name] += 1
                time.sleep(0.0005)

    gate.acquire()
    threads = [threading.Thread(target=busy, args=(name,)) for name in rounds]
    for thread in threads:
        thread.start()
    try:
        _waiting(gate, 2)
        began = time.monotonic()
        gate.hand_over(most=30)
        took = time.monotonic() - began
        assert all(rounds.values()), f"each waiting writer got in: {rounds}"
        assert took < 15, f"the hand-over waited {took:.1f} s for writers that keep coming back"
    finally:
        gate.release()
        stop.set()
        for thread in threads:
            thread.join(10)


def test_with_nobody_waiting_a_hand_over_takes_the_gate_straight_back() -> None:
    gate = Gate()
    gate.acquire()
    began = time.monotonic()
    gate.hand_over(most=30)
    assert gate.held == 1 and time.monotonic() - began < 1
    gate.release()
