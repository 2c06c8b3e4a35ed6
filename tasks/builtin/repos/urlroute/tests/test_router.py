import pytest

from urlroute import BuildError, MethodNotAllowed, NotFound, RequestRedirect, Router, RuleError


def make_router(**options):
    router = Router(**options)

    @router.get("/")
    def index():
        return "index"

    @router.get("/users/")
    def list_users():
        return "users"

    @router.get("/users/new")
    def new_user():
        return "new"

    @router.get("/users/<slug:username>")
    def show_user(username):
        return f"user {username}"

    @router.get("/posts/<int(min=1,max=100):page>")
    def posts(page):
        return f"page {page}"

    @router.route("/items/<int:item_id>", methods=["GET", "POST"])
    def item(item_id):
        return item_id

    @router.get("/files/<path:rest>")
    def files(rest):
        return rest

    @router.get("/about")
    def about():
        return "about"

    return router


def test_static_route_beats_dynamic_regardless_of_order():
    router = make_router()
    assert router.match("/users/new").name == "new_user"
    assert router.match("/users/ann").params == {"username": "ann"}


def test_match_int_bounds():
    router = make_router()
    assert router.match("/posts/5").params == {"page": 5}
    with pytest.raises(NotFound):
        router.match("/posts/0")
    with pytest.raises(NotFound):
        router.match("/posts/101")


def test_match_path_converter_and_query():
    match = make_router().match("/files/docs/readme.md?download=1")
    assert match.params == {"rest": "docs/readme.md"}
    assert match.query["download"] == "1"
    assert match() == "docs/readme.md"


def test_not_found():
    with pytest.raises(NotFound) as info:
        make_router().match("/nowhere")
    assert info.value.status_code == 404


def test_method_not_allowed_lists_methods():
    router = make_router()
    with pytest.raises(MethodNotAllowed) as info:
        router.match("/items/3", "DELETE")
    assert info.value.allowed == ["GET", "HEAD", "POST"]
    assert info.value.allow_header == "GET, HEAD, POST"
    assert router.match("/items/3", "post").params == {"item_id": 3}


def test_head_is_implied_by_get():
    assert make_router().match("/about", "HEAD").name == "about"


def test_trailing_slash_redirect():
    router = make_router()
    with pytest.raises(RequestRedirect) as info:
        router.match("/about/")
    assert info.value.location == "/about"
    with pytest.raises(RequestRedirect) as info:
        router.match("/users?sort=name")
    assert info.value.location == "/users/?sort=name"


def test_trailing_slash_ignore_and_strict():
    assert make_router(trailing_slash="ignore").match("/about/").name == "about"
    with pytest.raises(NotFound):
        make_router(trailing_slash="strict").match("/about/")
    with pytest.raises(ValueError):
        Router(trailing_slash="sometimes")


def test_dispatch_calls_endpoint():
    assert make_router().dispatch("/users/bob") == "user bob"


def test_duplicate_names_rejected():
    router = Router()
    router.add("/a", "A", name="a")
    with pytest.raises(RuleError):
        router.add("/b", "B", name="a")
    with pytest.raises(RuleError):
        router.add("/c", "C", methods=[])


def test_url_for_with_query_and_anchor():
    router = make_router()
    assert router.url_for("show_user", username="ann") == "/users/ann"
    assert router.url_for("item", item_id=4, tab="info", tags=["a", "b"]) == "/items/4?tab=info&tags=a&tags=b"
    assert router.url_for("about", _anchor="team") == "/about#team"
    assert router.url_for("files", rest="readme.md") == "/files/readme.md"


def test_url_for_errors():
    router = make_router()
    with pytest.raises(BuildError):
        router.url_for("missing")
    with pytest.raises(BuildError):
        router.url_for("item")
    with pytest.raises(BuildError):
        router.url_for("show_user", username="has space")
    with pytest.raises(BuildError):
        router.url_for("posts", page=0)
