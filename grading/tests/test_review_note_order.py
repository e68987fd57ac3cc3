"""A note's saves reach the server in any order (a slow save, the beacon sent as the page goes, a resend):
the note typed last is the one kept, as a draft and on a mark, and a note saved alone never undoes a choice.

Each save carries ``note_stamp``, when its text was typed (static/grading/review.js sets it); a page
without the script sends none, and its saves are taken as they come.
"""

import re
from unittest.mock import patch

import pytest

from grading import actions
from grading.models import Mark, Review

pytestmark = pytest.mark.django_db
HX = {"HX-Request": "true"}
LATER = "A note typed later is kept"


def save(client, submission, cell, note, stamp=None, passed=None, htmx=True):
    data = {"note": note}
    if stamp is not None:
        data["note_stamp"] = str(stamp)
    if passed is not None:
        data["passed"] = "true" if passed else "false"
    return client.post(f"/review/{submission.pk}/mark/{cell}/", data, headers=HX if htmx else {})


def cell_html(client, submission, cell) -> str:
    return client.get(f"/review/{submission.pk}/").content.decode().split(f'id="cell-{cell}"')[1].split("</aside>")[0]


def test_a_draft_note_typed_earlier_but_saved_later_changes_nothing(rob, submission):
    assert b"Note kept" in save(rob, submission, "red_log", "no closing line", stamp=2000).content
    late = save(rob, submission, "red_log", "no clo", stamp=1000)
    assert Review.objects.get().draft_notes == {"red_log": "no closing line"}
    assert late.status_code == 200 and b'role="alert"' not in late.content  # not an error on the page
    assert LATER.encode() in late.content
    cell = cell_html(rob, submission, "red_log")
    assert "no closing line</textarea>" in cell
    # The page says when the note it shows was typed; the script turns the stamp on (none without it).
    stamp = re.search(r'<input type="hidden" name="note_stamp"[^>]*>', cell).group(0)
    assert 'value="2000"' in stamp and "disabled" in stamp


def test_a_note_on_a_mark_typed_earlier_but_saved_later_changes_nothing(rob, submission):
    save(rob, submission, "red_log", "only a summary line", stamp=2000, passed=False)
    late = save(rob, submission, "red_log", "only a", stamp=1000)
    assert late.status_code == 200 and b'role="alert"' not in late.content
    mark = Mark.objects.get()
    assert (mark.passed, mark.note) == (False, "only a summary line")


def test_a_choice_sent_with_an_older_note_is_taken_without_its_note(rob, submission):
    save(rob, submission, "red_log", "typed later", stamp=2000)
    response = save(rob, submission, "red_log", "typed earlier", stamp=1000, passed=False)
    mark = Mark.objects.get()
    assert (mark.passed, mark.note) == (False, "typed later")
    assert LATER.encode() in response.content and b'role="alert"' not in response.content
    assert Review.objects.get().draft_notes == {}
    save(rob, submission, "red_log", "typed earlier still", stamp=1500, passed=True)
    assert Mark.objects.values_list("passed", "note").get() == (True, "typed later")


def test_an_emptied_note_stays_empty_when_an_older_save_arrives_after_it(rob, submission):
    save(rob, submission, "red_log", "first thought", stamp=1000)
    save(rob, submission, "red_log", "", stamp=2000)
    save(rob, submission, "red_log", "first thought", stamp=1000, htmx=False)  # a beacon, late
    assert Review.objects.get().draft_notes == {}
    save(rob, submission, "model_waited", "kept", stamp=1000, passed=True)
    save(rob, submission, "model_waited", "", stamp=2000)
    save(rob, submission, "model_waited", "kept", stamp=1500)
    assert Mark.objects.get(cell="model_waited").note == ""


def test_a_late_beacon_is_answered_without_an_error(rob, submission):
    save(rob, submission, "red_log", "no closing line", stamp=2000)
    response = save(rob, submission, "red_log", "no clo", stamp=1000, htmx=False)
    assert Review.objects.get().draft_notes == {"red_log": "no closing line"}
    assert response.status_code == 200 and LATER in response.content.decode()


def test_each_cell_keeps_its_own_order(rob, submission):
    save(rob, submission, "red_log", "red, typed late", stamp=5000)
    save(rob, submission, "model_waited", "stamp, typed early", stamp=1000)  # older than red's, another cell
    assert Review.objects.get().draft_notes == {"red_log": "red, typed late", "model_waited": "stamp, typed early"}


def test_saves_without_a_stamp_are_taken_as_they_come(rob, submission):
    """A page without the script (or from before the stamps): last come, kept, as before; and it is stamped
    with its arrival, so a save typed before that and arriving after it changes nothing."""
    save(rob, submission, "red_log", "from a page with the script", stamp=2000)
    save(rob, submission, "red_log", "from a page without it", htmx=False)
    assert Review.objects.get().draft_notes == {"red_log": "from a page without it"}
    save(rob, submission, "red_log", "typed before that", stamp=3000)
    assert Review.objects.get().draft_notes == {"red_log": "from a page without it"}
    save(rob, submission, "red_log", "again without", passed=False, htmx=False)
    assert Mark.objects.values_list("passed", "note").get() == (False, "again without")


def test_a_stamp_that_is_not_a_number_saves_nothing(rob, submission):
    response = rob.post(f"/review/{submission.pk}/mark/red_log/", {"note": "x", "note_stamp": "soon"}, headers=HX)
    assert response.status_code == 200 and b'role="alert"' in response.content
    assert not Review.objects.exists()


def test_a_note_saved_alone_never_undoes_a_choice_made_while_it_was_on_its_way(rob, reviewer, submission):
    """The box's save of "no clo" reaches the server; before it writes, a click on Pass (which sends the
    whole note) is written. The note's save must change neither the choice nor the note."""
    actions.do_save_mark(submission, reviewer, "red_log", False)
    mark, note_draft = actions.do_save_mark, actions.do_save_note_draft
    clicked = []

    def click_lands_first(real):
        def run(*args, **kwargs):
            if not clicked:
                clicked.append(mark(submission, reviewer, "red_log", True, "no closing line"))
            return real(*args, **kwargs)
        return run

    with patch("grading.actions.do_save_mark", click_lands_first(mark)), \
         patch("grading.actions.do_save_note_draft", click_lands_first(note_draft)):
        save(rob, submission, "red_log", "no clo", stamp=1000)
    assert clicked
    assert Mark.objects.values_list("passed", "note").get() == (True, "no closing line")
