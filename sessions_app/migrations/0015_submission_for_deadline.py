"""``for_deadline`` on Submission: a submission at the deadline records the deadline it was made for, and the
database keeps one per invitation and deadline instead of one per invitation, since an extension that reopens
a frozen workspace gives it a deadline of its own.

A submission at the deadline made before this gets its invitation's deadline when that deadline is still
earlier than the submission (it has not moved since, so it is the one the submission was for). When the
deadline was extended afterwards, the deadline it was made for is not known, and the field stays empty.
"""

from django.db import migrations, models


def record_deadlines(apps, schema_editor):
    Submission = apps.get_model("sessions_app", "Submission")
    rows = Submission.objects.filter(at_deadline=True, invitation__deadline__lt=models.F("uploaded_at"))
    for submission in rows.select_related("invitation"):
        submission.for_deadline = submission.invitation.deadline
        submission.save(update_fields=["for_deadline"])


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0014_model_exchange_conversation'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='submission',
            name='one_submission_at_the_deadline_per_invitation',
        ),
        migrations.AddField(
            model_name='submission',
            name='for_deadline',
            field=models.DateTimeField(blank=True, help_text='A submission at the deadline: the deadline it was made for (an extension gives the workspace another); empty for one made before this was kept whose deadline moved since.', null=True),
        ),
        migrations.RunPython(record_deadlines, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='submission',
            constraint=models.UniqueConstraint(condition=models.Q(('at_deadline', True)), fields=('invitation', 'for_deadline'), name='one_submission_at_each_deadline_per_invitation'),
        ),
    ]
