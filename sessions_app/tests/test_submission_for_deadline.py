"""A submission at the deadline records the deadline it was made for, and the database keeps one per invitation and
deadline: a later deadline (an extension) may have its own, the same deadline never two."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import IntegrityError, transaction
from django.utils import timezone

from sessions_app.models import Submission
from takehome.models import Invitation

from .test_submit_at_deadline import closing  # noqa: F401  (fixture)
from .test_workspace_gate import ws_settings  # noqa: F401  (fixture)
from .test_workspace_submit import workspace  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def test_a_submission_at_the_deadline_records_the_deadline_it_was_for(closing):  # noqa: F811
    closing.close()
    closing.sweep()
    submission = Submission.objects.get(invitation=closing.invitation)
    assert submission.at_deadline and submission.for_deadline == closing.invitation.deadline


def test_the_database_keeps_one_submission_at_the_deadline_per_invitation_and_deadline(started):
    deadline = timezone.now()

    def stored(for_deadline):
        return Submission.objects.create(invitation=started, archive="uploads/x.zip", sha256="0" * 64, size=1,
                                         via="hosted", at_deadline=True, for_deadline=for_deadline)

    stored(deadline)
    stored(deadline + timedelta(minutes=30))  # an extension's deadline
    with pytest.raises(IntegrityError), transaction.atomic():
        stored(deadline)


def test_the_migration_records_the_deadline_of_earlier_submissions_at_the_deadline(started):
    migration = importlib.import_module("sessions_app.migrations.0015_submission_for_deadline")
    now = timezone.now()
    Invitation.objects.filter(pk=started.pk).update(deadline=now - timedelta(minutes=10))
    before = Submission.objects.create(invitation=started, archive="uploads/x.zip", sha256="0" * 64, size=1,
                                       via="hosted", at_deadline=True, uploaded_at=now)
    own = Submission.objects.create(invitation=started, archive="uploads/y.zip", sha256="1" * 64, size=1,
                                    via="hosted", uploaded_at=now)
    migration.record_deadlines(apps, None)
    before.refresh_from_db()
    own.refresh_from_db()
    assert before.for_deadline == now - timedelta(minutes=10) and own.for_deadline is None
    # a deadline extended after the submission: the one it was for is not known, and none is made up
    Submission.objects.filter(pk=before.pk).update(for_deadline=None)
    Invitation.objects.filter(pk=started.pk).update(deadline=now + timedelta(minutes=30))
    migration.record_deadlines(apps, None)
    before.refresh_from_db()
    assert before.for_deadline is None
