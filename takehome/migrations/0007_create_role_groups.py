"""The two roles are groups every installation has, not only a demo one."""

from django.db import migrations

ROLE_GROUPS = ("recruiter", "reviewer")


def create_groups(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in ROLE_GROUPS:
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("takehome", "0006_rubric_definitions"),
    ]

    # Going back leaves the groups: members may have been added to them since.
    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
