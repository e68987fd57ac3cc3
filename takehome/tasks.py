"""The recruiter side's tasks: a packet version's self-check, the sweep that sends lost ones again, and the
clean-up of zips kept from refused packet forms."""

from celery import shared_task

from shared.tasks import retry_countdown


@shared_task(bind=True, acks_late=True, max_retries=3, soft_time_limit=300, time_limit=360)
def check_packet_version(self, check_id: int) -> str:
    """Run one packet version's self-check (takehome.actions.do_run_packet_check); retries a sandbox that cannot start."""
    from grading.engine.sandbox import SandboxUnavailable

    from .actions import do_run_packet_check

    try:
        check = do_run_packet_check(check_id, final=self.request.retries >= self.max_retries)
    except SandboxUnavailable as exc:
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries))
    return check.status if check else "skipped"


@shared_task(ignore_result=True)
def sweep_packet_checks() -> int:
    """Send again the self-checks whose message was lost: queued for a minute, or running far too long (worker died)."""
    from .actions import do_resend_stale_checks

    return do_resend_stale_checks()


@shared_task(ignore_result=True)
def send_reminders() -> int:
    """Email the reminders that are due to candidates who have not pressed Start (takehome.reminders)."""
    from .reminders import sweep

    return sweep()


@shared_task(ignore_result=True)
def forget_kept_uploads() -> int:
    """Delete the zips kept from refused packet forms once they are too old to be used (takehome.kept_uploads)."""
    from .kept_uploads import forget_stale

    return forget_stale()
