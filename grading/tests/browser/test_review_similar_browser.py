"""In headless Chromium: the similar submissions appear on the review page only once the four cells are marked,
without a reload, and not a moment before."""

import pytest

from conftest import log_in
from grading import similarity
from grading.tests import similar_answers
from grading.tests.reviewing import make_submission

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_list_appears_only_after_the_four_cells_are_marked(live_server, page, make_reviewer):
    from takehome.actions import do_load_sample_packet

    packet, _ = do_load_sample_packet()
    make_reviewer("rob")
    ada = make_submission(packet, "Ada Copy", evidence=similar_answers.model_evidence())
    bob = make_submission(packet, "Bob Renamed", evidence=similar_answers.renamed_evidence())
    cy = make_submission(packet, "Cy Honest", evidence=similar_answers.honest_evidence())
    for s in (ada, bob, cy):
        similarity.record(s.pk)
    blocked = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: blocked.append(str(e)))
    log_in(page, live_server.url, "rob")
    page.goto(f"{live_server.url}/review/{ada.pk}/")

    section = page.locator("#similar-section")
    listed = section.locator("[data-similar]")
    assert "Listed once you have marked the four cells" in section.inner_text()
    for cell in ("red_log", "model_waited", "refusal_specific"):
        page.click(f"#pass-{cell}")
        page.locator(f"#cell-{cell}.scored").wait_for()
        assert listed.count() == 0, f"listed after marking only up to {cell}"
    # the diff cell unfolds after the first three; its mark is the fourth
    page.click("#pass-test_names_bug")
    page.locator("#cell-test_names_bug.scored").wait_for()
    listed.first.wait_for()
    assert [listed.nth(i).get_attribute("data-similar") for i in range(listed.count())] == [str(bob.pk)]
    assert "Bob Renamed" in section.inner_text() and "Cy Honest" not in section.inner_text()
    assert "test diff 1.00" in section.inner_text()
    # and a reload keeps it
    page.reload()
    assert page.locator("#similar-section [data-similar]").count() == 1
    assert blocked == []
