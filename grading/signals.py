"""What the desk announces to the apps above it (the API's webhooks), which import grading, never the reverse
(.importlinter). A signal carries ids, not rows; it is sent inside the writer's transaction, so a receiver that
reaches outside acts once that commits (transaction.on_commit)."""

from django.dispatch import Signal

# Sent as a submission's evidence is saved and its status becomes graded (grading.lifecycle.finish_graded),
# with ``submission_id``: each time, a regrade too.
submission_graded = Signal()

# Sent as a reviewer's review becomes final (grading.actions.do_submit_review), with ``review_id``; a second
# submit, which changes nothing, sends nothing.
review_submitted = Signal()
