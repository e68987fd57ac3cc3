"""The one way the settings read the environment: typed, checked, and recorded for the docs.

takehome/settings.py reads every variable through an `Env`:

    env = Env()
    UPLOAD_GRACE_S = env.duration("TAKEHOME_UPLOAD_GRACE_S", 300, doc="...")

Each call declares the variable (its name, type, default, bounds or choices, and
one line saying what it does) in `env.registry`, and returns its value. A value
that cannot be used stops the process with a `SettingError` (an
ImproperlyConfigured) that names the variable and says what to write instead;
nothing is guessed. Variables other programs read (`make run`, docker compose)
are declared with `elsewhere()`, so one registry lists every knob.

The settings table of the docs is rendered from the registry (`render_table`;
docs/hooks/settings_table.py puts it in docs/settings.md), and the tests check
that the settings read nothing around it and that `.env.example` agrees, so the
three cannot drift apart.

An empty value counts as unset: the default applies. So `NAME=` in a copy of
`.env.example` means the default, never "the empty path" or "false".
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}
# The plural a duration's unit takes in messages and in the table.
DURATION_UNITS = {"s": "seconds", "min": "minutes", "days": "days"}


class SettingError(ImproperlyConfigured):
    """A variable's value cannot be used; the message names it and says what to write."""


class _NotGiven:
    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = _NotGiven()


@dataclass(frozen=True)
class Setting:
    """One declared variable, as the docs show it."""

    name: str
    kind: str  # bool, int, float, duration, str, list, choice, path, url, secret
    doc: str
    section: str
    default: object = None
    debug_default: object = NOT_GIVEN  # the default when DEBUG=true, when it differs
    shown: str | None = None  # the default in words, when it is computed on the machine
    debug_shown: str | None = None
    least: float | None = None
    above: float | None = None
    choices: tuple[str, ...] = ()
    unit: str = ""  # a number's unit (MB, bytes), or a duration's (s, min, days)
    read_by: str = ""  # another program reads it (make run, docker compose), not the settings
    in_env_example: bool = True

    @property
    def names(self) -> tuple[str, ...]:
        """The variables it answers to: a secret may also come from the file NAME_FILE names."""
        return (self.name, f"{self.name}_FILE") if self.kind == "secret" else (self.name,)

    def type_text(self) -> str:
        """Its type in words, with its bounds."""
        if self.kind == "duration":
            text = DURATION_UNITS[self.unit]
        elif self.kind == "choice":
            text = " or ".join(", ".join(f"`{c}`" for c in self.choices).rsplit(", ", 1))
        else:
            text = {"bool": "true or false", "int": "whole number", "float": "number", "str": "text",
                    "list": "comma-separated list", "path": "path", "url": "URL",
                    "secret": "secret, or a file holding it"}[self.kind]
            if self.unit:
                text += f" ({self.unit})"
        if self.above is not None:
            text += f", more than {_plain(self.above)}"
        elif self.least:
            text += f", at least {_plain(self.least)}"
        return text

    def default_text(self) -> str:
        """Its default in words; the development one too when DEBUG=true changes it."""
        text = self.shown or self._shown(self.default)
        if self.debug_default is not NOT_GIVEN:
            text += f"; with `DEBUG=true`: {self.debug_shown or self._shown(self.debug_default)}"
        return text

    def _shown(self, value: object) -> str:
        text = _shown(value)
        if self.unit == "bytes" and isinstance(value, int) and value:
            for size, name in ((1024 * 1024, "MiB"), (1024, "KiB")):
                if value % size == 0:
                    return f"{text} ({value // size} {name})"
        return text


def _plain(number: float) -> str:
    return f"{number:g}" if isinstance(number, float) else str(number)


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if value == "" or value == []:
        return "empty"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float):
        return f"`{value:g}`"
    if isinstance(value, list):
        return "`" + ",".join(value) + "`"
    return f"`{value}`"


class Registry:
    """The declared variables, in the order the settings declare them."""

    def __init__(self) -> None:
        self._settings: dict[str, Setting] = {}

    def add(self, setting: Setting) -> None:
        # why: a variable read in two places could get two defaults, and the docs would show one.
        taken = set(setting.names) & self.names()
        if taken:
            raise RuntimeError(f"{', '.join(sorted(taken))} is declared twice: read it once and reuse the value.")
        self._settings[setting.name] = setting

    def names(self) -> set[str]:
        """Every variable name, a secret's NAME_FILE included."""
        return {name for setting in self._settings.values() for name in setting.names}

    def __iter__(self) -> Iterator[Setting]:
        return iter(self._settings.values())

    def __getitem__(self, name: str) -> Setting:
        return self._settings[name]

    def __len__(self) -> int:
        return len(self._settings)


def _hide_password(url: str) -> str:
    try:
        parts = urlsplit(url)
        if parts.password:
            return url.replace(f":{parts.password}@", ":***@", 1)
    except ValueError:
        pass
    return url


def _print_setting_errors_plainly() -> None:
    """An uncaught SettingError prints its message alone: the reader needs nothing from the traceback."""
    if getattr(sys.excepthook, "prints_setting_errors", False):
        return
    previous = sys.excepthook

    def hook(kind, value, traceback):
        if isinstance(value, SettingError):
            print(f"takehome cannot start: {value}", file=sys.stderr)
        else:
            previous(kind, value, traceback)

    hook.prints_setting_errors = True
    sys.excepthook = hook


class Env:
    """Reads the environment (or `environ`), one declared variable at a time.

    Every reader takes the variable's name, its default and `doc` (one line for the
    docs), and may take `shown` (the default in words, when it is computed on this
    machine: a path under the checkout, the host name) and `debug_default` (the
    default when DEBUG=true; set `env.debug` first).
    """

    def __init__(self, environ: MutableMapping[str, str] | None = None) -> None:
        self.environ = os.environ if environ is None else environ
        self.registry = Registry()
        self.debug: bool | None = None
        self._section = "Settings"
        _print_setting_errors_plainly()

    # --- declaring ---------------------------------------------------------------------------------

    def section(self, title: str) -> None:
        """The docs' heading for the variables declared next."""
        self._section = title

    def _declare(self, name: str, kind: str, default: object, doc: str, **spec) -> Setting:
        if isinstance(default, Path) and not spec.get("shown"):
            # why: a computed path would put this machine's folders in the docs.
            raise TypeError(f"{name}: a computed default needs shown= (the default in words, for the docs)")
        setting = Setting(name=name, kind=kind, doc=doc, section=self._section, default=default, **spec)
        self.registry.add(setting)
        return setting

    def _default(self, setting: Setting) -> object:
        if setting.debug_default is NOT_GIVEN:
            return setting.default
        if self.debug is None:
            raise RuntimeError(f"{setting.name} has a development default: read DEBUG and set env.debug first")
        return setting.debug_default if self.debug else setting.default

    def _raw(self, name: str) -> str | None:
        value = self.environ.get(name)
        if value is None or not value.strip():
            return None
        return value

    # --- readers -----------------------------------------------------------------------------------

    def bool(self, name: str, default: bool, *, doc: str, **spec) -> bool:
        setting = self._declare(name, "bool", default, doc, **spec)
        raw = self._raw(name)
        if raw is None:
            return self._default(setting)
        word = raw.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise SettingError(f"{name}={raw} is not a boolean: write true or false.")

    def int(self, name: str, default: int, *, doc: str, least: int = 0, unit: str = "", **spec) -> int:
        """A count or a size: whole, never negative, at least `least`."""
        setting = self._declare(name, "int", default, doc, least=least, unit=unit, **spec)
        what = f"a whole number of {unit}" if unit else "a whole number"
        return self._number(setting, what, what, whole=True)

    def float(self, name: str, default: float, *, doc: str, least: float = 0, above: float | None = None,
              **spec) -> float:
        setting = self._declare(name, "float", default, doc, least=least, above=above, **spec)
        return self._number(setting, "a number", "a number", whole=False)

    def duration(self, name: str, default: int | float, *, doc: str, unit: str = "s", least: float = 0,
                 above: float | None = None, **spec) -> int | float:
        """A duration in `unit` (s, min or days); whole when the default is an int, never negative."""
        setting = self._declare(name, "duration", default, doc, unit=unit, least=least, above=above, **spec)
        units = DURATION_UNITS[unit]
        whole = isinstance(default, int)
        return self._number(setting, f"a duration in {units}", f"a whole number of {units}" if whole else
                            f"a number of {units}", whole=whole)

    def _number(self, setting: Setting, what: str, kind_words: str, *, whole: bool) -> int | float:
        raw = self._raw(setting.name)
        if raw is None:
            return self._default(setting)
        name, example = setting.name, _plain(setting.default if setting.default is not None else setting.least)
        try:
            value = int(raw.strip()) if whole else float(raw.strip())
        except ValueError:
            raise SettingError(f"{name}={raw} is not {kind_words}: write e.g. {example}.") from None
        if not math.isfinite(value):
            raise SettingError(f"{name}={raw} is not {kind_words}: write e.g. {example}.")
        if setting.above is not None:
            bound, fits = f"more than {_plain(setting.above)}", value > setting.above
        elif setting.least:
            bound, fits = f"at least {_plain(setting.least)}", value >= setting.least
        else:
            bound, fits = "0 or more", value >= 0
        if not fits:
            problem = "is negative" if value < 0 else "is too small"
            raise SettingError(f"{name}={raw} {problem}: give {what}, {bound}.")
        return value

    def str(self, name: str, default: str, *, doc: str, **spec) -> str:
        setting = self._declare(name, "str", default, doc, **spec)
        raw = self._raw(name)
        return self._default(setting) if raw is None else raw

    def list(self, name: str, default: list[str], *, doc: str, **spec) -> list[str]:
        """Comma-separated; blanks around the commas are dropped."""
        setting = self._declare(name, "list", default, doc, **spec)
        raw = self._raw(name)
        if raw is None:
            return list(self._default(setting))
        return [item.strip() for item in raw.split(",") if item.strip()]

    def choice(self, name: str, default: str, choices: tuple[str, ...] | list[str], *, doc: str, **spec) -> str:
        setting = self._declare(name, "choice", default, doc, choices=tuple(choices), **spec)
        raw = self._raw(name)
        if raw is None:
            return self._default(setting)
        if raw.strip() not in setting.choices:
            listed = " or ".join(", ".join(setting.choices).rsplit(", ", 1))
            raise SettingError(f"{name}={raw} is not one of the choices: write {listed}.")
        return raw.strip()

    def path(self, name: str, default: Path, *, doc: str, **spec) -> Path:
        setting = self._declare(name, "path", default, doc, **spec)
        raw = self._raw(name)
        return Path(self._default(setting)) if raw is None else Path(raw.strip())

    def url(self, name: str, default: str, *, doc: str, schemes: tuple[str, ...] = (), example: str = "",
            **spec) -> str:
        """A URL; with `schemes`, one of those (http, https...). Empty only when the default is."""
        setting = self._declare(name, "url", default, doc, **spec)
        raw = self._raw(name)
        if raw is None:
            return self._default(setting)
        value = raw.strip()
        if "://" not in value or (schemes and value.split("://", 1)[0] not in schemes):
            starts = " or ".join(f"{s}://" for s in schemes) if schemes else "a scheme such as https://"
            raise SettingError(f"{name}={_hide_password(value)} does not start with {starts}: "
                               f"write e.g. {example or 'https://...'}.")
        return value

    def database_url(self, name: str, default: str, *, doc: str, **spec) -> dict:
        """Django's DATABASES entry from a URL (django-environ's schemes: postgres://, sqlite:///...)."""
        return self._parsed_url(name, default, doc, "database", environ.Env.db_url_config,
                                "postgres://user:password@host:5432/takehome", spec,
                                known=lambda url: url.split("://", 1)[0] in environ.Env.DB_SCHEMES)

    def email_url(self, name: str, default: str, *, doc: str, **spec) -> dict:
        """Django's EMAIL_* settings from a URL (smtp+tls://, consolemail://...)."""
        return self._parsed_url(name, default, doc, "email", environ.Env.email_url_config,
                                "smtp+tls://user:password@smtp.example.com:587", spec)

    def cache_url(self, name: str, default: str, *, doc: str, **spec) -> dict:
        """Django's CACHES entry from a URL (redis://, locmemcache://...)."""
        return self._parsed_url(name, default, doc, "cache", environ.Env.cache_url_config,
                                "redis://redis:6379/1", spec)

    def _parsed_url(self, name: str, default: str, doc: str, what: str, parse: Callable[[str], dict],
                    example: str, spec: dict, known: Callable[[str], bool] = lambda url: True) -> dict:
        setting = self._declare(name, "url", default, doc, **spec)
        raw = self._raw(name)
        value = self._default(setting) if raw is None else raw.strip()
        problem = None
        if "://" not in value or not known(value):
            problem = "its scheme is not one takehome knows"
        else:
            try:
                config = parse(value)
            except Exception as exc:  # django-environ says why in its own words
                problem = str(exc) or type(exc).__name__
        if problem:
            raise SettingError(f"{name}={_hide_password(value)} is not {_article(what)} {what} URL ({problem}): "
                               f"write e.g. {example}.")
        return config

    def secret(self, name: str, default: str | None, *, doc: str, **spec) -> str | None:
        """NAME, or the contents of the file NAME_FILE names (as Docker mounts secrets); the file wins.

        A secret's value is never shown, in the docs or in a message.
        """
        setting = self._declare(name, "secret", default, doc, **spec)
        file_name = self._raw(f"{name}_FILE")
        if file_name:
            try:
                return Path(file_name.strip()).read_text().strip()
            except OSError as exc:
                raise SettingError(f"{name}_FILE={file_name} cannot be read ({exc.strerror}): name a file this "
                                   f"user can read, or set {name} instead.") from None
        raw = self._raw(name)
        return self._default(setting) if raw is None else raw

    def read_env_file(self, default: Path | str, *, doc: str, **spec) -> Path | None:
        """Fill the environment from TAKEHOME_ENV_FILE (else `default`); what is already set wins.

        TAKEHOME_ENV_FILE set but empty reads no file; named but missing is an error. An empty
        `default` reads none unless the variable names one.
        """
        name = "TAKEHOME_ENV_FILE"
        self._declare(name, "path", default, doc, in_env_example=False, **spec)
        chosen = self.environ.get(name)
        given = chosen is not None
        chosen = chosen.strip() if given else str(default)
        if not chosen:
            return None
        path = Path(chosen)
        if path.is_file():
            # django-environ's parser (quotes, `export`, comments), writing into our mapping.
            into = type("_IntoEnviron", (environ.Env,), {"ENVIRON": self.environ})
            into.read_env(path, overwrite=False)
            return path
        if given:
            raise SettingError(f"{name}={chosen} is not a file: name an existing file, or leave it empty to "
                               "read none.")
        return None

    def elsewhere(self, name: str, kind: str, default: object, *, read_by: str, doc: str, **spec) -> None:
        """Declare a variable another program reads (make run, docker compose), for the docs and .env.example."""
        self._declare(name, kind, default, doc, read_by=read_by, **spec)


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


# --- the docs' table --------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(registry: Registry, heading: str = "##") -> str:
    """The registry as Markdown: one table per section (variable, type, default, what it does)."""
    sections: dict[str, list[Setting]] = {}
    for setting in registry:
        sections.setdefault(setting.section, []).append(setting)
    lines: list[str] = []
    for title, settings in sections.items():
        lines += [f"{heading} {title}", "", "| variable | type | default | what it does |", "|---|---|---|---|"]
        for s in settings:
            doc = s.doc
            if s.read_by:
                doc += f" Read by {s.read_by}, not by the settings."
            lines.append("| " + " | ".join(_cell(part) for part in (
                " or ".join(f"`{n}`" for n in s.names), s.type_text(), s.default_text(), doc)) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """`python -c 'from shared.settings_env import main; main(["takehome.settings"])'`: print the table."""
    import importlib

    module = importlib.import_module(argv[0] if argv else "takehome.settings")
    print(render_table(module.env.registry))
    return 0
