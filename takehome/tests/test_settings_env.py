"""The settings' reader (shared/settings_env.py) on its own: each type, its bounds, and what it records.

In-process, on a plain dict for the environment; test_settings.py runs the same
errors through a real start of the settings.
"""

from pathlib import Path

import pytest

from shared.settings_env import Env, SettingError, render_table


def read(method: str, value: str | None, *args, **spec):
    env = Env({} if value is None else {"X": value})
    return getattr(env, method)("X", *args, doc="A knob.", **spec)


@pytest.mark.parametrize("method, args, spec, value, expected", [
    ("bool", (False,), {}, "Yes", True),
    ("bool", (True,), {}, " off ", False),
    ("int", (5,), {}, "0", 0),
    ("int", (5,), {"least": 1}, "1", 1),
    ("duration", (300,), {}, "45", 45),
    ("duration", (1.0,), {}, "0.25", 0.25),
    ("duration", (15,), {"unit": "min", "least": 1}, "1", 1),
    ("float", (1.0,), {"above": 0}, "0.5", 0.5),
    ("choice", ("auto", ("auto", "mount")), {}, "mount", "mount"),
    ("list", (["a"],), {}, "x, y,,z ", ["x", "y", "z"]),
    ("str", ("d",), {}, "as is ", "as is "),
    ("path", (Path("/d"),), {"shown": "`/d`"}, "/srv/media", Path("/srv/media")),
    ("url", ("",), {"schemes": ("http", "https")}, "https://m.example/v1", "https://m.example/v1"),
])
def test_a_good_value_is_read_as_its_type(method, args, spec, value, expected):
    got = read(method, value, *args, **spec)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("method, args, spec", [
    ("bool", (True,), {}),
    ("int", (5,), {"least": 1}),
    ("duration", (300,), {}),
    ("choice", ("auto", ("auto", "mount")), {}),
    ("list", (["a", "b"],), {}),
    ("path", (Path("/d"),), {"shown": "`/d`"}),
    ("str", ("d",), {}),
])
@pytest.mark.parametrize("value", [None, "", "  "])
def test_unset_or_empty_means_the_default(method, args, spec, value):
    assert read(method, value, *args, **spec) == args[0]


@pytest.mark.parametrize("method, args, spec, value, says", [
    ("int", (5,), {}, "-1", "X=-1 is negative: give a whole number, 0 or more."),
    ("int", (5,), {"unit": "MB", "least": 64}, "10", "X=10 is too small: give a whole number of MB, at least 64."),
    ("int", (5,), {}, "5.0", "X=5.0 is not a whole number: write e.g. 5."),
    ("duration", (300,), {}, "-3", "X=-3 is negative: give a duration in seconds, 0 or more."),
    ("duration", (300,), {}, "5m", "X=5m is not a whole number of seconds: write e.g. 300."),
    ("duration", (3,), {"unit": "days"}, "-1", "X=-1 is negative: give a duration in days, 0 or more."),
    ("duration", (2.0,), {"above": 0}, "0", "X=0 is too small: give a duration in seconds, more than 0."),
    ("duration", (2.0,), {"above": 0}, "inf", "X=inf is not a number of seconds: write e.g. 2."),
    ("float", (1.0,), {"above": 0}, "-0.5", "X=-0.5 is negative: give a number, more than 0."),
    ("bool", (False,), {}, "maybe", "X=maybe is not a boolean: write true or false."),
    ("choice", ("auto", ("auto", "mount", "bwrap")), {}, "Auto", "X=Auto is not one of the choices: write auto, "
                                                                  "mount or bwrap."),
    ("url", ("",), {"schemes": ("http", "https")}, "ftp://h", "X=ftp://h does not start with http:// or https://"),
    ("url", ("",), {}, "localhost:6379", "X=localhost:6379 does not start with a scheme such as https://"),
    ("database_url", ("sqlite:///x",), {}, "nosql://u:pw@h/db", "X=nosql://u:***@h/db is not a database URL"),
    ("cache_url", ("locmemcache://",), {}, "bogus://h", "X=bogus://h is not a cache URL"),
])
def test_a_bad_value_stops_with_the_variable_and_what_to_write(method, args, spec, value, says):
    with pytest.raises(SettingError) as error:
        read(method, value, *args, **spec)
    assert str(error.value).startswith(says)


def test_a_secret_comes_from_its_file_first(tmp_path):
    key = tmp_path / "key"
    key.write_text("from-file\n")
    env = Env({"K": "from-env", "K_FILE": str(key)})
    assert env.secret("K", None, doc="A key.") == "from-file"
    assert env.registry.names() == {"K", "K_FILE"}
    assert Env({"K": "from-env"}).secret("K", None, doc="A key.") == "from-env"


def test_a_secret_file_that_cannot_be_read_names_the_file_variable_and_never_the_secret(tmp_path):
    with pytest.raises(SettingError, match=r"^K_FILE=.*missing cannot be read") as error:
        Env({"K": "s3cret", "K_FILE": str(tmp_path / "missing")}).secret("K", None, doc="A key.")
    assert "s3cret" not in str(error.value)


def test_a_development_default_follows_debug():
    for debug, expected in ((True, ["localhost"]), (False, [])):
        env = Env({})
        env.debug = debug
        assert env.list("HOSTS", [], debug_default=["localhost"], doc="Hosts.") == expected
    with pytest.raises(RuntimeError, match="read DEBUG"):
        Env({}).list("HOSTS", [], debug_default=["localhost"], doc="Hosts.")


def test_the_env_file_fills_in_what_the_environment_lacks(tmp_path):
    path = tmp_path / "site.env"
    path.write_text("# a comment\nA=from-file\nexport B='quoted'\n")
    environ = {"TAKEHOME_ENV_FILE": str(path), "A": "from-env"}
    assert Env(environ).read_env_file("", doc="The file.") == path
    assert environ["A"] == "from-env" and environ["B"] == "quoted"
    assert Env({"TAKEHOME_ENV_FILE": ""}).read_env_file(path, shown="`x`", doc="The file.") is None
    with pytest.raises(SettingError, match="^TAKEHOME_ENV_FILE=.*missing is not a file"):
        Env({"TAKEHOME_ENV_FILE": str(tmp_path / "missing")}).read_env_file("", doc="The file.")


def test_a_variable_is_declared_once():
    env = Env({})
    env.int("N", 1, doc="A count.")
    with pytest.raises(RuntimeError, match="N is declared twice"):
        env.duration("N", 1, doc="The same count.")
    env.secret("K", "", doc="A key.")
    with pytest.raises(RuntimeError, match="K_FILE is declared twice"):
        env.path("K_FILE", Path("/k"), shown="`/k`", doc="Its file.")


def test_a_computed_path_needs_its_default_in_words():
    with pytest.raises(TypeError, match="shown="):
        Env({}).path("P", Path("/home/me/checkout/var"), doc="A folder.")


def test_the_table_has_a_row_per_setting_grouped_by_section():
    env = Env({})
    env.debug = False
    env.section("First")
    env.int("A_COUNT", 3, least=1, doc="Counts | things.")
    env.secret("A_KEY", None, debug_default="dev", shown="none: required", debug_shown="a development key",
               doc="A key.")
    env.section("Second")
    env.int("A_SIZE", 2 * 1024 * 1024, unit="bytes", doc="A size.")
    env.elsewhere("A_PORT", "int", 8000, read_by="`make run`", doc="A port.")
    assert render_table(env.registry).splitlines() == [
        "## First",
        "",
        "| variable | type | default | what it does |",
        "|---|---|---|---|",
        "| `A_COUNT` | whole number, at least 1 | `3` | Counts \\| things. |",
        "| `A_KEY` or `A_KEY_FILE` | secret, or a file holding it | none: required; with `DEBUG=true`: a development "
        "key | A key. |",
        "",
        "## Second",
        "",
        "| variable | type | default | what it does |",
        "|---|---|---|---|",
        "| `A_SIZE` | whole number (bytes) | `2097152` (2 MiB) | A size. |",
        "| `A_PORT` | whole number | `8000` | A port. Read by `make run`, not by the settings. |",
    ]
