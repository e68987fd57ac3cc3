from django import forms

from .actions import ROLES, WORK_ROLES

ROLE_CHOICES = [(role, role.capitalize().replace("-", " ")) for role in ROLES]


class InviteMemberForm(forms.Form):
    email = forms.EmailField(max_length=150, help_text="Also their username for logging in.")
    role = forms.ChoiceField(choices=[choice for choice in ROLE_CHOICES if choice[0] in WORK_ROLES])


class MemberRolesForm(forms.Form):
    roles = forms.MultipleChoiceField(choices=ROLE_CHOICES, required=False,
                                      widget=forms.CheckboxSelectMultiple)
