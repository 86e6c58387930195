"""The Flask shop: pages equal the text env's, product text is escaped, malformed requests never give a 500."""

from __future__ import annotations

import http.client
import json
import random
from urllib.parse import quote

import pytest

from tests.conftest import require_data

pytest.importorskip("flask")


@pytest.fixture(scope="module")
def engine():
    from agentgym.envs.webshop.engine import get_engine

    return get_engine(require_data("webshop", "documents_1k.jsonl").parent)


@pytest.fixture(scope="module")
def server(engine):
    from agentgym.envs.webshop.server import Shop, ShopServer

    srv = ShopServer(Shop(engine))
    yield srv
    srv.close()


def request(server, method: str, path: str, body: str | None = None) -> tuple[int, str, dict[str, str]]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read().decode("utf-8", errors="replace")
    out = (r.status, data, dict(r.getheaders()))
    conn.close()
    return out


def test_pages_show_what_the_text_env_shows(server, engine):
    from agentgym.envs.webshop.env import WebShopEnv
    from agentgym.envs.webshop.pages import html_to_text

    env = WebShopEnv(engine=engine)
    obs, _ = env.reset(options={"split": "test", "index": 2})
    status, html, _ = request(server, "GET", "/fixed_2")
    assert status == 200 and html_to_text(html) == obs

    goal = engine.goals[2]
    status, _, headers = request(server, "POST", "/fixed_2", "search_query=" + quote(goal["instruction_text"]))
    assert status == 303 and "/search_results/fixed_2/1?q=" in headers["Location"]
    obs, *_ = env.step(f"search[{goal['instruction_text']}]")
    status, html, _ = request(server, "GET", headers["Location"])
    assert status == 200 and html_to_text(html) == obs

    asin = goal["asin"]
    obs, *_ = env.step(f"click[{asin.lower()}]")
    q = quote(goal["instruction_text"].lower())
    status, html, _ = request(server, "GET", f"/item_page/fixed_2/{asin}/1?q={q}")
    assert status == 200 and html_to_text(html) == obs

    obs, *_ = env.step("click[features]")
    status, html, _ = request(server, "GET", f"/item_sub_page/fixed_2/{asin}/1/Features?q={q}")
    assert status == 200 and html_to_text(html) == obs


def test_buying_on_the_site_scores_like_the_env(server, engine):
    from agentgym.envs.webshop.pages import parse_html

    goal = engine.goals[0]
    opts = quote(json.dumps(goal["goal_options"]))
    status, html, _ = request(server, "GET", f"/done/fixed_0/{goal['asin']}?options={opts}")
    assert status == 200
    assert "Your score (min 0.0, max 1.0) [SEP] 1.0" in parse_html(html).text


def test_product_and_query_text_is_escaped(tmp_path):
    """A product whose text is markup shows as text on every page."""
    from agentgym.envs.webshop.catalog import index_text
    from agentgym.envs.webshop.engine import get_engine
    from agentgym.envs.webshop.pages import html_to_text
    from agentgym.envs.webshop.server import Shop, ShopServer

    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    product = {
        "asin": "B0EVIL0001",
        "name": f"Evil Lamp {evil}",
        "Title": f"Evil Lamp {evil}",
        "Description": f"desc {evil}",
        "BulletPoints": [f"bullet {evil}"],
        "Price": "$10.0",
        "pricing": [10.0],
        "options": {"color": [f"red {evil}"]},
        "option_to_image": {},
        "Attributes": ["lamp"],
        "Reviews": [],
        "Rating": "N.A.",
        "MainImage": "",
        "images": [""],
        "category": "garden",
        "query": "lamps",
        "product_category": "Home › Lighting",
        "small_description": [],
        "full_description": "",
        "customization_options": "",
    }
    line = json.dumps({"id": product["asin"], "contents": index_text(product), "product": product})
    (tmp_path / "documents_1k.jsonl").write_text(line + "\n")
    ins = {product["asin"]: {"attributes": ["lamp"], "instruction": f"buy {evil}", "instruction_attributes": ["lamp"]}}
    (tmp_path / "items_ins_v2_1000.json").write_text(json.dumps(ins))
    srv = ShopServer(Shop(get_engine(tmp_path)))
    try:
        q = quote(f"evil lamp {evil}")
        opts = quote(json.dumps({"color": f"red {evil}"}))
        for path in (
            "/fixed_0",
            f"/search_results/fixed_0/1?q={q}",
            f"/item_page/fixed_0/B0EVIL0001/1?q={q}&options={opts}",
            f"/item_sub_page/fixed_0/B0EVIL0001/1/Description?q={q}",
            f"/item_sub_page/fixed_0/B0EVIL0001/1/Features?q={q}",
        ):
            status, html, _ = request(srv, "GET", path)
            assert status == 200, path
            assert "<script>alert" not in html and "<img src=x" not in html, path
            assert "alert(1)" in html_to_text(html), path  # shown as text
    finally:
        srv.close()


def test_malformed_requests_never_get_a_500(server, engine):
    rng = random.Random(1234)
    asins = [p["asin"] for p in engine.catalog.products[:5]] + ["", "NOPE", "B0" + "9" * 40, "../etc", "<b>"]
    sessions = ["fixed_1", "fixed_99999999", "abc", "a" * 100, "bad id", "%00", "fixed_-1", "é"]
    pages = ["1", "0", "-1", "abc", "99999999999999999999", "1.5", "", "²", "١", "9" * 5000, "0001", " 1"]
    queries = [None, "", " ", "shoes", "<script>x</script>", "a" * 10_000, "%zz", "ü" * 50, "[[]]", "\x00"]
    options = [None, "", "{", "[]", "null", '{"size": 3}', '{"color": "no such"}', json.dumps({"x" * 500: "y"})]
    options += ["[" * 3000 + "]" * 3000, '{"a":' * 3000 + "1" + "}" * 3000, "{" + "," * 5000 + "}"]
    subs = ["Description", "Features", "Reviews", "Attributes", "nope", ""]

    def qs(q, o):
        parts = []
        if q is not None:
            parts.append("q=" + quote(q, safe=""))
        if o is not None:
            parts.append("options=" + quote(o, safe=""))
        return "?" + "&".join(parts) if parts else ""

    for _ in range(250):
        s = quote(rng.choice(sessions), safe="")
        a = quote(rng.choice(asins), safe="")
        p = quote(rng.choice(pages), safe="")
        tail = qs(rng.choice(queries), rng.choice(options))
        path = rng.choice(
            [
                f"/{s}",
                f"/search_results/{s}/{p}{tail}",
                f"/item_page/{s}/{a}/{p}{tail}",
                f"/item_sub_page/{s}/{a}/{p}/{rng.choice(subs)}{tail}",
                f"/done/{s}/{a}{tail}",
                f"/search_results/{s}",
                "/static/../../etc/passwd",
                "//",
                f"/item_page/{s}",
            ]
        )
        method = rng.choice(["GET", "POST", "PUT", "HEAD"])
        body = None
        if method == "POST":
            body = rng.choice(["", "search_query=", "search_query=" + quote("a" * 5000), "%%%", "search_query=shoes"])
        status, _, _ = request(server, method, path, body)
        assert status < 500, (method, path, body, status)
    assert request(server, "GET", "/fixed_3")[0] == 200  # and it still answers


@pytest.mark.parametrize(
    "path, status, message",
    [
        ("/search_results/fixed_1/%C2%B2?q=shoes", 400, "page must be a number from 1 to 1000"),
        ("/search_results/fixed_1/" + "9" * 5000 + "?q=shoes", 400, "page must be a number"),
        ("/item_page/fixed_1/B0NOSUCH/1?q=shoes", 404, "no product"),
        ("/fixed_99999999", 404, "goal 99999999 does not exist"),
        ("/bad%20id", 400, "session ids are 1-64 letters"),
        ("/search_results/fixed_1/1", 400, "an empty search"),
    ],
)
def test_malformed_parameters_get_a_4xx_that_says_why(server, path, status, message):
    got, html, _ = request(server, "GET", path)
    assert got == status and message in html


def test_deeply_nested_or_huge_options_are_400(server, engine):
    asin = engine.goals[1]["asin"]
    for raw, message in [
        ('{"a":' * 3000 + "1" + "}" * 3000, "options must be a JSON object"),
        ("[" * 1000 + "]" * 1000, "options must be a JSON object"),
        (json.dumps({"color": "x" * 5000}), "at most 4096 characters"),
    ]:
        status, html, _ = request(server, "GET", f"/item_page/fixed_1/{asin}/1?q=shoes&options={quote(raw, safe='')}")
        assert status == 400 and message in html


def test_oversized_body_is_413(server):
    status, _, _ = request(server, "POST", "/fixed_1", "search_query=" + "a" * 100_000)
    assert status == 413


def test_sessions_are_bounded_least_recently_used_first(engine):
    from agentgym.envs.webshop.pages import html_to_text
    from agentgym.envs.webshop.server import Shop, ShopServer

    srv = ShopServer(Shop(engine, max_sessions=3))
    try:
        assert request(srv, "GET", "/fixed_7")[0] == 200
        for i in range(3):
            assert request(srv, "GET", f"/client{i}")[0] == 200
            request(srv, "GET", "/fixed_7")  # kept in use: never the least recently used
        assert list(srv.shop.sessions) == ["client1", "client2", "fixed_7"]
        for i in range(200):
            request(srv, "GET", f"/other{i}")
        assert len(srv.shop.sessions) == 3
        # a dropped session starts afresh on its own goal
        status, html, _ = request(srv, "GET", "/fixed_7")
        assert status == 200 and engine.goals[7]["instruction_text"] in html_to_text(html)
    finally:
        srv.close()


def test_cli_serve_starts_the_shop(tmp_path):
    """`agentgym webshop serve` answers on the port it was given (127.0.0.1 only)."""
    import os
    import socket
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = require_data("webshop", "documents_1k.jsonl").parent
    cmd = [sys.executable, "-m", "agentgym", "webshop", "serve", "--port", str(port), "--data-dir", str(data)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/fixed_4")
                r = conn.getresponse()
                body = r.read().decode()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    out = proc.stdout.read().decode() if proc.poll() is not None else "no answer"
                    raise AssertionError(out) from None
                time.sleep(0.3)
        assert r.status == 200 and 'id="search_input"' in body
    finally:
        proc.terminate()
        proc.wait(timeout=10)
