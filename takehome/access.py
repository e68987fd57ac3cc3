"""Who may see what: the recruiter and reviewer groups."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

RECRUITER_GROUP = "recruiter"
REVIEWER_GROUP = "reviewer"


def in_group(user, name: str) -> bool:
    return user.is_authenticated and (user.is_superuser or user.groups.filter(name=name).exists())


def group_required(name: str):
    """Login required, then membership of `name` (superusers pass); otherwise 403."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not in_group(request.user, name):
                raise PermissionDenied(f"This page is for the {name} group.")
            return view(request, *args, **kwargs)

        return login_required(wrapped)

    return decorator


recruiter_required = group_required(RECRUITER_GROUP)
reviewer_required = group_required(REVIEWER_GROUP)
