"""The numbers of the files the server writes for the model's replies (prompt-N.txt, model-N.md) are never
given twice: not when a reply that started later ends first, not when two replies end together (the chat
pane and `gate ask`). The workspace's write is stood in for; the numbering is sessions_app.actions'."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from sessions_app import actions
from sessions_app.hosted import workspaces
from sessions_app.models import ModelExchange


def reserved(invitation, prompt: str, seconds: int) -> ModelExchange:
    """An exchange under way (reserved before its upstream call), started ``seconds`` from now."""
    return ModelExchange.objects.create(invitation=invitation, messages=[{"role": "user", "content": prompt}],
                                        at=timezone.now() + timedelta(seconds=seconds), finished=False)


def answer(exchange: ModelExchange) -> None:
    ModelExchange.objects.filter(pk=exchange.pk).update(finished=True, reply=f"reply to {exchange.prompt}")


@pytest.fixture
def written(monkeypatch):
    """What the server wrote into the workspace, by path; the write takes ``written.gate`` first when set."""
    files: dict[str, bytes] = {}
    lock = threading.Lock()

    def write_files(invitation, new: dict[str, bytes]) -> bool:
        gate = getattr(write_files, "gate", None)
        if gate is not None:
            gate.wait(timeout=30)
        with lock:
            files.update(new)
        return True

    monkeypatch.setattr(workspaces, "write_files", write_files)
    write_files.files = files  # type: ignore[attr-defined]
    return write_files


@pytest.mark.django_db
def test_a_reply_that_ends_before_an_earlier_one_keeps_its_file(started, written):
    first, second = reserved(started, "first", 0), reserved(started, "second", 1)
    answer(second)  # the later question is answered first
    assert actions.do_write_model_artifacts(second) == "artifacts/model.md"
    answer(first)
    # why: numbered by its place among the answered ones, it took 1 too and overwrote the other's reply
    assert actions.do_write_model_artifacts(first) == "artifacts/model-2.md"
    assert written.files["artifacts/model.md"] == b"reply to second"
    assert written.files["artifacts/model-2.md"] == b"reply to first"
    assert written.files["artifacts/prompt-2.txt"] == b"first"
    # the server's copies at Submit name the same files
    assert actions.server_reply_files(started) == {
        "artifacts/prompt.txt": b"second", "artifacts/model.md": b"reply to second",
        "artifacts/prompt-2.txt": b"first", "artifacts/model-2.md": b"reply to first"}


@pytest.mark.django_db(transaction=True)
def test_two_replies_ending_together_get_different_numbers(started, written):
    exchanges = [reserved(started, "from the chat pane", 0), reserved(started, "from gate ask", 1)]
    written.gate = threading.Barrier(2)  # both are in the write at once, each holding the number it took
    got: dict[int, str] = {}

    def complete(exchange: ModelExchange) -> None:
        try:
            got[exchange.pk] = actions.do_write_model_artifacts(exchange)
        finally:
            connection.close()

    # the second to start ends first, and the other ends while its number is being taken
    answer(exchanges[1])
    threads = [threading.Thread(target=complete, args=(exchanges[1],))]
    threads[0].start()
    answer(exchanges[0])
    threads.append(threading.Thread(target=complete, args=(exchanges[0],)))
    threads[1].start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(got.values()) == ["artifacts/model-2.md", "artifacts/model.md"], got
    stored = dict(ModelExchange.objects.values_list("pk", "artifact"))
    assert stored == got
