"""The model window's chat panel in Chromium, on a phone, in front of the fake upstream (conftest.py)."""

import pytest

from sessions_app.models import ModelExchange
from sessions_app.tests.conftest import REPLY

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_prompt_streams_its_reply_and_joins_the_history(live_server, browser, upstream, red, settings):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.set_default_timeout(15000)
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    try:
        page.goto(f"{live_server.url}/t/{red.raw_token}/")
        page.get_by_label("Your prompt").fill("Why is the refund total wrong?")
        page.click("#model-send")
        # the streamed reply gives way to the conversation, where it is shown as Markdown
        exchange = page.locator("#model-history .model-exchange")
        exchange.wait_for()
        assert "Why is the refund total wrong?" in exchange.inner_text() and REPLY in exchange.inner_text()
        sent = ModelExchange.objects.get()
        assert sent.streamed and sent.messages == [{"role": "user", "content": "Why is the refund total wrong?"}]
        assert page.evaluate("document.documentElement.scrollWidth") <= 390

        upstream.mode = "cut"  # the stream breaks mid-way: its error event is shown in words
        page.get_by_label("Your prompt").fill("And refunds?")  # a sent prompt leaves the box
        page.click("#model-send")
        page.locator("#model-error", has_text="broke off before it ended").wait_for()
        page.locator("#model-history .model-exchange").nth(1).wait_for()

        settings.MODEL_MAX_REQUESTS = 2  # the cap is reached: the endpoint's 429 is shown in words
        page.get_by_label("Your prompt").fill("Once more?")
        page.click("#model-send")
        page.locator("#model-error", has_text="cap is reached").wait_for()
        assert ModelExchange.objects.count() == 2
        assert blocked == []
    finally:
        context.close()
