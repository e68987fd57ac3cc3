from django import forms

from .actions import ROLES

ROLE_CHOICES = [(role, role.capitalize()) for role in ROLES]


class InviteMemberForm(forms.Form):
    email = forms.EmailField(max_length=150, help_text="Also their username for logging in.")
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class MemberRolesForm(forms.Form):
    roles = forms.MultipleChoiceField(choices=ROLE_CHOICES, required=False,
                                      widget=forms.CheckboxSelectMultiple)
