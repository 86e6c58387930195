"""The WebShop web site: a Flask app serving the same pages as the text env, for people and for the browser mode.

``agentgym webshop serve [--host 127.0.0.1 --port 3000]`` starts it; open ``http://HOST:PORT/`` (a new session
with a goal drawn from the session id) or ``/fixed_<i>`` for goal ``i``. Routes follow the original
``web_agent_site/app.py``: ``/<session_id>`` (search page; a POSTed ``search_query`` goes to the results),
``/search_results/<session_id>/<page>``, ``/item_page/<session_id>/<asin>/<page>``,
``/item_sub_page/<session_id>/<asin>/<page>/<sub_page>`` and ``/done/<session_id>/<asin>``, with the keywords
(``q``) and selected options (``options``, JSON) in the query string so that any text survives the URL. Every
page is rendered by :func:`agentgym.envs.webshop.pages.to_html` (Jinja autoescape on). Malformed requests get a
400, 404 or 413 page naming what is wrong, never a 500: pages are 1-4 ASCII digits, ``options`` a flat JSON object
of at most :data:`MAX_OPTIONS_CHARS` characters, bodies at most :data:`MAX_BODY_BYTES`.

Sessions are bounded: the shop keeps the :data:`MAX_SESSIONS` most recently used ones (least recently used
dropped first). A request for a dropped session starts it afresh on its goal (``fixed_<i>`` keeps its goal; other
ids draw the same goal from their hash), so a shop serving an unbounded stream of session ids keeps a bounded
memory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import secrets
import threading
from collections import OrderedDict
from typing import Any

from agentgym.envs.webshop.engine import ShopSession, WebShopEngine
from agentgym.envs.webshop.pages import SUB_PAGES, Links, to_html

SESSION_RE = re.compile(r"[A-Za-z0-9_\-]{1,64}")
FIXED_RE = re.compile(r"fixed_([0-9]+)(?:_[A-Za-z0-9\-]*)?")
#: ASCII digits only (``str.isdigit`` accepts "²", which ``int`` refuses), and few of them: a page is never huge.
PAGE_RE = re.compile(r"[0-9]{1,4}")
MAX_QUERY_CHARS = 1000
MAX_PAGE = 1000
#: Longest ``options`` JSON accepted (a product has a handful of options of short values).
MAX_OPTIONS_CHARS = 4096
#: Largest request body (a search form is well under 2 kB).
MAX_BODY_BYTES = 64 * 1024
#: Sessions kept (least recently used dropped first); each is a few kB.
MAX_SESSIONS = 10_000


class BadRequest(Exception):
    """A request the shop cannot serve; becomes a 400 (or the given status) page."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Shop:
    """Sessions of the web shop over one engine (thread-safe).

    Args:
        engine: the shared engine.
        show_attrs: show the Attributes sub page.
        max_sessions: sessions kept; the least recently used is dropped when a new one would exceed it.
    """

    def __init__(self, engine: WebShopEngine, show_attrs: bool = False, max_sessions: int = MAX_SESSIONS) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self.engine = engine
        self.show_attrs = show_attrs
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[str, ShopSession] = OrderedDict()
        self.lock = threading.RLock()

    def goal_for(self, session_id: str) -> int:
        """``fixed_<i>[_suffix]`` plays goal i; any other id a goal drawn from a hash of the id."""
        m = FIXED_RE.fullmatch(session_id)
        n = len(self.engine.goals)
        if m is not None:
            i = int(m.group(1))
            if i >= n:
                raise BadRequest(f"goal {i} does not exist (there are {n})", 404)
            return i
        return int.from_bytes(hashlib.sha1(session_id.encode()).digest()[:8], "big") % n

    def new_session(self, session_id: str, goal_index: int | None = None) -> ShopSession:
        """Create (or replace) a session; the browser mode uses this to pick the goal itself."""
        if not SESSION_RE.fullmatch(session_id):
            raise BadRequest("session ids are 1-64 letters, digits, '_' or '-'")
        idx = self.goal_for(session_id) if goal_index is None else goal_index
        with self.lock:
            s = ShopSession(self.engine, self.engine.goals[idx], session_id=session_id, show_attrs=self.show_attrs)
            s.goal_index = idx  # type: ignore[attr-defined]
            self.sessions[session_id] = s
            self.sessions.move_to_end(session_id)
            while len(self.sessions) > self.max_sessions:
                self.sessions.popitem(last=False)
        return s

    def session(self, session_id: str) -> ShopSession:
        if not SESSION_RE.fullmatch(session_id):
            raise BadRequest("session ids are 1-64 letters, digits, '_' or '-'")
        with self.lock:
            s = self.sessions.get(session_id)
            if s is not None:
                self.sessions.move_to_end(session_id)
                return s
        return self.new_session(session_id)


def _keywords(q: str | None) -> list[str]:
    if q is None or not q.strip():
        raise BadRequest("an empty search: go back and type what you are looking for")
    if len(q) > MAX_QUERY_CHARS:
        raise BadRequest(f"search queries are limited to {MAX_QUERY_CHARS} characters")
    return q.lower().split(" ")


def _page(value: str) -> int:
    if not PAGE_RE.fullmatch(value) or not 1 <= int(value) <= MAX_PAGE:
        raise BadRequest(f"page must be a number from 1 to {MAX_PAGE} (ASCII digits), got {value[:20]!r}")
    return int(value)


def _options(raw: str | None, product: dict[str, Any]) -> dict[str, str]:
    if not raw:
        return {}
    if len(raw) > MAX_OPTIONS_CHARS:
        raise BadRequest(f"options must be a JSON object {{name: value}} of at most {MAX_OPTIONS_CHARS} characters")
    try:
        options = json.loads(raw)
    except (ValueError, RecursionError) as e:  # RecursionError: nesting deeper than the parser's stack
        raise BadRequest(f"options must be a JSON object {{name: value}}: {str(e)[:100]}") from e
    if not isinstance(options, dict):
        raise BadRequest("options must be a JSON object {name: value}")
    for name, value in options.items():
        if not isinstance(value, str) or value not in product["options"].get(name, ()):
            raise BadRequest(f"this product has no option {name!r} = {value!r}")
    return options


def create_app(shop: Shop):
    """The Flask app of ``shop``."""
    from flask import Flask, redirect, request
    from markupsafe import escape

    from agentgym.envs.webshop.pages import TEMPLATE_DIR

    app = Flask(__name__, static_folder=str(TEMPLATE_DIR.parent / "static"), static_url_path="/static")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES  # larger bodies get a 413

    def product_of(asin: str) -> dict[str, Any]:
        p = shop.engine.catalog.by_asin.get(asin)
        if p is None:
            raise BadRequest(f"no product {asin!r}", 404)
        return p

    def render(s: ShopSession):
        assert s.page is not None
        return to_html(s.page, Links(s.session_id))

    @app.errorhandler(BadRequest)
    def bad_request(e: BadRequest):
        return f"<!DOCTYPE html><html><body><h3>{escape(str(e))}</h3></body></html>", e.status

    @app.route("/", methods=["GET", "POST"])
    def home():
        return redirect(f"/{secrets.token_hex(5)}")

    @app.route("/<session_id>", methods=["GET", "POST"])
    def index(session_id: str):
        s = shop.session(session_id)
        if request.method == "POST" and "search_query" in request.form:
            keywords = _keywords(request.form["search_query"])
            return redirect(Links(session_id).results(keywords, 1), code=303)
        with shop.lock:
            s.done, s.score = False, None
            s.go_index()
            return render(s)

    @app.route("/search_results/<session_id>/<page>", methods=["GET", "POST"])
    def search_results(session_id: str, page: str):
        s = shop.session(session_id)
        keywords, page_num = _keywords(request.args.get("q")), _page(page)
        with shop.lock:
            s.go_results(keywords, page_num)
            return render(s)

    @app.route("/item_page/<session_id>/<asin>/<page>", methods=["GET", "POST"])
    def item_page(session_id: str, asin: str, page: str):
        s = shop.session(session_id)
        product = product_of(asin)
        keywords, page_num = _keywords(request.args.get("q")), _page(page)
        options = _options(request.args.get("options"), product)
        with shop.lock:
            s.keywords, s.page_num, s.options = keywords, page_num, options
            s.go_item(asin)
            return render(s)

    @app.route("/item_sub_page/<session_id>/<asin>/<page>/<sub_page>", methods=["GET", "POST"])
    def item_sub_page(session_id: str, asin: str, page: str, sub_page: str):
        s = shop.session(session_id)
        product = product_of(asin)
        keywords, page_num = _keywords(request.args.get("q")), _page(page)
        options = _options(request.args.get("options"), product)
        allowed = SUB_PAGES if shop.show_attrs else SUB_PAGES[:3]
        if sub_page not in allowed:
            raise BadRequest(f"sub page must be one of {', '.join(allowed)}", 404)
        with shop.lock:
            s.keywords, s.page_num, s.options, s.asin = keywords, page_num, options, asin
            s.go_sub(sub_page)
            return render(s)

    @app.route("/done/<session_id>/<asin>", methods=["GET", "POST"])
    def done(session_id: str, asin: str):
        s = shop.session(session_id)
        product = product_of(asin)
        options = _options(request.args.get("options"), product)
        with shop.lock:
            s.asin, s.options = asin, options
            s.buy()
            return render(s)

    return app


class ShopServer:
    """The shop served from a background thread (used by the browser mode and tests).

    Args:
        shop: the shop to serve.
        host: interface to bind; keep 127.0.0.1 unless you mean to expose the shop.
        port: 0 picks a free port.
    """

    def __init__(self, shop: Shop, host: str = "127.0.0.1", port: int = 0) -> None:
        from werkzeug.serving import WSGIRequestHandler, make_server

        class QuietHandler(WSGIRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:  # one line per click would flood test logs
                pass

        self.shop = shop
        self.httpd = make_server(host, port, create_app(shop), threaded=True, request_handler=QuietHandler)
        self.host, self.port = host, self.httpd.server_port
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="webshop-server", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    """``agentgym webshop serve``: run the shop until interrupted."""
    from agentgym.envs.webshop.catalog import PRICE_SEED
    from agentgym.envs.webshop.engine import get_engine

    parser = argparse.ArgumentParser(prog="agentgym webshop", description="The WebShop web site.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the shop over HTTP")
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=3000, help="TCP port (default 3000; 0 = any free port)")
    serve.add_argument("--data-dir", default=None, help="WebShop data folder (default $AGENTGYM_DATA/webshop)")
    serve.add_argument(
        "--num-products", type=int, default=None, help="serve only the first N products (default: all of them)"
    )
    serve.add_argument(
        "--human-goals",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="human-written goals (default: synthetic)",
    )
    serve.add_argument(
        "--price-seed", type=int, default=PRICE_SEED, help=f"seed of the product prices (default {PRICE_SEED})"
    )
    serve.add_argument("--show-attrs", action="store_true", help="show the Attributes sub page")
    args = parser.parse_args(argv)
    engine = get_engine(
        args.data_dir, num_products=args.num_products, human_goals=args.human_goals, price_seed=args.price_seed
    )
    app = create_app(Shop(engine, show_attrs=args.show_attrs))
    print(f"WebShop: {len(engine.catalog)} products, {len(engine.goals)} goals at http://{args.host}:{args.port}/")
    app.run(host=args.host, port=args.port, threaded=True)
    return 0
