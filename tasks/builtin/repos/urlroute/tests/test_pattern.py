import pytest

from urlroute import BuildError, Pattern, RuleError, parse_rule
from urlroute.pattern import Static, Variable, parse_converter_args


def test_parse_rule_parts():
    parts = parse_rule("/users/<int:id>/posts")
    assert parts[0] == Static("/users/")
    assert isinstance(parts[1], Variable) and parts[1].name == "id"
    assert parts[2] == Static("/posts")


def test_parse_converter_args():
    assert parse_converter_args("min=1, max=10") == ((), {"min": 1, "max": 10})
    assert parse_converter_args("png, 'jpg'") == (("png", "jpg"), {})
    assert parse_converter_args("") == ((), {})


def test_rule_errors():
    with pytest.raises(RuleError):
        parse_rule("users")
    with pytest.raises(RuleError):
        parse_rule("/<nope:x>")
    with pytest.raises(RuleError):
        parse_rule("/<a>/<a>")
    with pytest.raises(RuleError):
        parse_rule("/<int(min=1:x>")
    with pytest.raises(RuleError):
        parse_rule("/<int(colour=1):x>")


def test_match_and_convert():
    pattern = Pattern("/posts/<int:year>/<slug:title>")
    assert pattern.match("/posts/2024/hello-world") == {"year": 2024, "title": "hello-world"}
    assert pattern.match("/posts/abc/hello") is None
    assert pattern.match("/posts/2024/hello/extra") is None


def test_match_decodes_percent_escapes():
    assert Pattern("/tags/<name>").match("/tags/caf%C3%A9") == {"name": "café"}


def test_path_converter_matches_slashes():
    pattern = Pattern("/files/<path:rest>")
    assert pattern.match("/files/a/b/c.txt") == {"rest": "a/b/c.txt"}
    assert pattern.match("/files/") is None


def test_build_simple():
    pattern = Pattern("/users/<int:id>/<name>")
    assert pattern.build({"id": 3, "name": "ann lee"}) == "/users/3/ann%20lee"


def test_build_errors():
    pattern = Pattern("/users/<int:id>")
    with pytest.raises(BuildError):
        pattern.build({})
    with pytest.raises(BuildError):
        pattern.build({"id": "abc"})
    with pytest.raises(BuildError):
        Pattern("/p/<slug:s>").build({"s": "no spaces allowed"})


def test_priority_prefers_static_segments():
    static = Pattern("/users/new")
    dynamic = Pattern("/users/<name>")
    typed = Pattern("/users/<int:id>")
    assert static.priority < typed.priority < dynamic.priority
    assert Pattern("/files/<int:id>/meta").priority < Pattern("/files/<path:rest>").priority
