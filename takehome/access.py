"""Who may see what: the recruiter and reviewer groups."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

RECRUITER_GROUP = "recruiter"
REVIEWER_GROUP = "reviewer"


def group_names(user) -> frozenset[str]:
    """The names of the user's groups, read once per user object (that is, once per request)."""
    # why cached: the view's check and the navigation's two would otherwise be a query each.
    names = getattr(user, "_takehome_group_names", None)
    if names is None:
        names = frozenset(user.groups.values_list("name", flat=True))
        user._takehome_group_names = names
    return names


def in_group(user, name: str) -> bool:
    return user.is_authenticated and (user.is_superuser or name in group_names(user))


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
