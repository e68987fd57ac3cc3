"""What grading stored: the evidence for one submission."""

from django.db import models
from django.utils import timezone

from sessions_app.models import Submission


class Evidence(models.Model):
    """The grader's findings for one submission, in the `grade_zip` JSON shape.

    Written by grading.pipeline only, replaced whole when a submission is
    graded again (grading is idempotent: the same zip gives the same evidence).
    Evidence helps reviewers; it never fills a rubric cell by itself.
    """

    submission = models.OneToOneField(Submission, on_delete=models.CASCADE, related_name="evidence")
    data = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    grader_version = models.CharField(max_length=20)
    duration_s = models.FloatField(default=0)

    def __str__(self) -> str:
        return f"evidence for {self.submission_id}"
