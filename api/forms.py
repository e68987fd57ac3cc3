"""The account page's token form and the webhooks page's endpoint form."""

from __future__ import annotations

from django import forms

from .models import EVENTS, ApiToken


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What it is for, e.g. \"Greenhouse sync\".")
    scope = forms.ChoiceField(choices=ApiToken.Scope.choices, initial=ApiToken.Scope.READ, widget=forms.RadioSelect,
                              help_text="Read: list packets and read invitations. Read and write: also invite "
                                        "candidates and record decisions.")


class EndpointForm(forms.Form):
    url = forms.URLField(max_length=500, assume_scheme="https", label="Endpoint URL",
                         help_text="Where events are posted (HTTPS), signed with a secret shown once.")
    description = forms.CharField(max_length=200, required=False)
    events = forms.MultipleChoiceField(choices=[(e, e) for e in EVENTS], initial=list(EVENTS),
                                       widget=forms.CheckboxSelectMultiple)
