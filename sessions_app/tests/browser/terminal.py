"""What the browser tests of the hosted terminal share."""

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout


def wait_connected(page, timeout: float = 30_000) -> None:
    """Until the terminal's status says connected; a timeout fails with what the status said instead."""
    try:
        page.locator("#terminal-status[data-state='connected']").wait_for(timeout=timeout)
    except PlaywrightTimeout:
        status = page.locator("#terminal-status")
        pytest.fail(f"the terminal did not connect in {timeout / 1000:g} s: its status says "
                    f"{status.inner_text()!r} (state {status.get_attribute('data-state')!r})")
