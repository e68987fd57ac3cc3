"""Numbers as a person says them in a message."""


def counted(n: int, noun: str) -> str:
    """'1 minute', '5 minutes', '0 uploads': the number and its noun, plural unless the number is 1."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def listed(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c': items as a sentence lists them."""
    if len(items) < 2:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
