"""The reviewers' agreement kept per packet, reviewer pair and cell, filled from the reviews already submitted."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def fill_tally(apps, schema_editor):
    from grading.actions import do_rebuild_agreement

    do_rebuild_agreement(apps, using=schema_editor.connection.alias)


class Migration(migrations.Migration):

    dependencies = [
        ('grading', '0004_gradingrun'),
        ('sessions_app', '0002_submission_superseded'),
        ('takehome', '0003_packet_file_decoys'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AgreementTally',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('cell', models.CharField(choices=[('red_log', 'Red log is a real pytest failure'), ('model_waited', 'Model waited'), ('refusal_specific', 'Refusal is specific'), ('test_names_bug', 'Test names the bug')], max_length=20)),
                ('both_pass', models.IntegerField(default=0)),
                ('a_pass_b_fail', models.IntegerField(default=0)),
                ('a_fail_b_pass', models.IntegerField(default=0)),
                ('both_fail', models.IntegerField(default=0)),
                ('packet', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='takehome.packet')),
                ('reviewer_a', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('reviewer_b', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('packet', 'reviewer_a', 'reviewer_b', 'cell'), name='agreement_one_per_pair_cell'), models.CheckConstraint(condition=models.Q(('reviewer_a__lt', models.F('reviewer_b'))), name='agreement_pair_ordered')],
            },
        ),
        migrations.RunPython(fill_tally, migrations.RunPython.noop),
    ]
