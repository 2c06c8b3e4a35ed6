import pytest

from urlroute import MethodNotAllowed, NotFound, Router, RuleError


def make_app():
    api = Router()
    api.add("/", "api-root", name="root")
    api.add("/users/<int:user_id>", "user", name="user")
    api.add("/users/<int:user_id>", "update-user", methods=["PUT"], name="update_user")

    admin = Router()
    admin.add("/stats", "stats", name="stats")
    api.mount("/admin", admin, name="admin")

    app = Router()
    app.add("/", "home", name="home")
    app.add("/health", "health", name="health")
    app.mount("/api", api, name="api")
    return app


def test_match_in_mounted_router():
    match = make_app().match("/api/users/5?verbose=1")
    assert match.name == "api.user"
    assert match.params == {"user_id": 5}
    assert match.path == "/api/users/5"
    assert match.query["verbose"] == "1"


def test_nested_mounts():
    assert make_app().match("/api/admin/stats").name == "api.admin.stats"


def test_mount_root():
    app = make_app()
    assert app.match("/api").name == "api.root"
    assert app.match("/").name == "home"


def test_url_for_namespaced():
    app = make_app()
    assert app.url_for("api.user", user_id=9) == "/api/users/9"
    assert app.url_for("api.admin.stats", range="7d") == "/api/admin/stats?range=7d"
    assert app.url_for("health") == "/health"
    assert app.has_route("api.user") and not app.has_route("api.nope")


def test_unnamed_mount_keeps_names():
    sub = Router()
    sub.add("/ping", "pong", name="ping")
    app = Router()
    app.mount("/v1", sub)
    assert app.match("/v1/ping").name == "ping"
    assert app.url_for("ping") == "/v1/ping"


def test_mount_not_found():
    with pytest.raises(NotFound):
        make_app().match("/api/users/abc")


def test_mounted_method_not_allowed():
    with pytest.raises(MethodNotAllowed) as info:
        make_app().match("/api/admin/stats", "POST")
    assert info.value.allowed == ["GET", "HEAD"]


def test_mount_errors():
    app = Router()
    with pytest.raises(RuleError):
        app.mount("api", Router())
    with pytest.raises(RuleError):
        app.mount("/", Router())
    with pytest.raises(RuleError):
        app.mount("/self", app)
