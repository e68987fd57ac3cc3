"""The team-admin role is a group every installation has, as the two others are (0007)."""

from django.db import migrations


def create_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.get_or_create(name="team admin")


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("takehome", "0016_audit_deadline_submit"),
    ]

    # Going back leaves the group: members may have been added to it since.
    operations = [migrations.RunPython(create_group, migrations.RunPython.noop)]
