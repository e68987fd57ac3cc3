"""What the candidate's side announces to the desk (grading), which imports sessions_app, never the reverse
(.importlinter). The desk connects its receivers in its AppConfig.ready."""

from django.dispatch import Signal

# Sent inside an upload's transaction, under the invitation's row lock, once the new Submission and its
# upload receipt exist, with ``submission``. The desk's receiver (grading.lifecycle.upload_stored)
# supersedes the invitation's older uploads still waiting and sends the grading once the transaction
# commits, so a rollback sends nothing; it answers with what it did, whose ``sent`` says, after the
# commit, whether the broker took the message. A receiver that raises rolls the upload back.
submission_stored = Signal()

# Sent inside the Start's transaction (sessions_app.actions.do_start_session), once the clock is set, with
# ``invitation_id``; a second Start, which changes nothing, sends nothing. Receivers that reach outside (the
# webhooks) act once it commits.
invitation_started = Signal()
