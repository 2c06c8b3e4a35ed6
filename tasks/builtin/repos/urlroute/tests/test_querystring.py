from urlroute import QueryParams, encode_query, parse_query, split_target


def test_parse_basic():
    params = parse_query("a=1&b=two&a=3")
    assert params["a"] == "1"
    assert params.getlist("a") == ["1", "3"]
    assert list(params) == ["a", "b"]
    assert len(params) == 2


def test_parse_plus_and_escapes():
    params = parse_query("?q=hello+world&city=S%C3%A3o%20Paulo")
    assert params["q"] == "hello world"
    assert params["city"] == "São Paulo"


def test_parse_blank_and_bare_keys():
    params = parse_query("a=&b&c=1;d=2")
    assert params.to_dict() == {"a": [""], "b": [""], "c": ["1"], "d": ["2"]}
    assert parse_query("a=&c=1", keep_blank_values=False).to_dict() == {"c": ["1"]}


def test_parse_empty():
    assert len(parse_query("")) == 0
    assert parse_query("&&") == QueryParams()


def test_encode():
    assert encode_query({"q": "a b", "n": 3}) == "q=a+b&n=3"
    assert encode_query({"tag": ["x", "y"], "skip": None, "flag": True}) == "tag=x&tag=y&flag=true"
    assert encode_query([("k", "a&b=c")]) == "k=a%26b%3Dc"
    assert encode_query({}) == ""


def test_encode_parse_round_trip():
    original = [("name", "Zoë"), ("expr", "1/2 ; x"), ("name", "bob")]
    assert parse_query(encode_query(original)).multi_items() == original


def test_split_target():
    assert split_target("/a/b?x=1#frag") == ("/a/b", "x=1")
    assert split_target("/a") == ("/a", "")
    assert split_target("?x=1") == ("/", "x=1")
