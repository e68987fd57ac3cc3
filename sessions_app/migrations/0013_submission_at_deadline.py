"""A hosted workspace is submitted by the server at the deadline plus grace: the mark on the submission, the
digest it is compared by, and the workspace's "settled" time.

Workspaces frozen before this are settled as they are: submitting them now, long after their deadline,
would put work on the board that nobody expected.
"""

from django.db import migrations, models


def settle_frozen(apps, schema_editor):
    Workspace = apps.get_model("sessions_app", "Workspace")
    Workspace.objects.filter(frozen_at__isnull=False).update(deadline_settled_at=models.F("frozen_at"))


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0012_submission_grading_sent_by'),
        ('takehome', '0015_audit_workspace_unsaved'),
    ]

    operations = [
        migrations.AddField(
            model_name='submission',
            name='at_deadline',
            field=models.BooleanField(default=False, help_text='Submitted by the server itself when the deadline plus grace passed: the hosted workspace as it was then.'),
        ),
        migrations.AddField(
            model_name='submission',
            name='earlier_submit_at',
            field=models.DateTimeField(blank=True, help_text="A submission at the deadline: when the candidate's own last submission was, if they made one.", null=True),
        ),
        migrations.AddField(
            model_name='submission',
            name='files_digest',
            field=models.CharField(blank=True, help_text="A hosted submission: sha256 over the names and contents of its files (actions.files_digest); '' for an uploaded zip.", max_length=64),
        ),
        migrations.AddField(
            model_name='workspace',
            name='deadline_settled_at',
            field=models.DateTimeField(blank=True, help_text="When the sweep settled the deadline's submit: the frozen files submitted, or found unchanged since the last submission.", null=True),
        ),
        migrations.RunPython(settle_frozen, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='submission',
            constraint=models.UniqueConstraint(condition=models.Q(('at_deadline', True)), fields=('invitation',), name='one_submission_at_the_deadline_per_invitation'),
        ),
    ]
