"""The Ray dashboard proxy against a stand-in dashboard: paths, queries, bodies and redirects pass through; a job
with no running cluster, or a dashboard that does not answer, gets a reason."""

from __future__ import annotations

import importlib.util
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse

from flexq.auth import TokenBook
from flexq.server.authn import Authenticator, AuthMiddleware
from flexq.server.bodylimit import BodyLimit
from flexq.server.guard import RequestGuard
from flexq.server.raycap import LIFETIME, capability, capability_key
from flexq.server.rayproxy import SANDBOX, ray_proxy_router
from tests import admin
from tests.conftest import free_port
from tests.server.inprocess import serving


def _dashboard() -> FastAPI:
    app = FastAPI()

    @app.api_route("/api/{path:path}", methods=["GET", "POST"])
    async def api(request: Request, path: str) -> Any:
        return JSONResponse({"path": path, "query": request.url.query, "body": (await request.body()).decode(),
                             "host": request.headers["host"]}, headers={"x-ray": "1"})

    @app.get("/old")
    async def old(request: Request) -> Any:
        return RedirectResponse(f"http://{request.headers['host']}/api/new", status_code=302)

    return app


def test_requests_reach_the_jobs_dashboard_and_come_back() -> None:
    ports: dict[tuple[str, str], int] = {}
    lookup: list[Callable[[str, str], int | None]] = [lambda ns, name: ports.get((ns, name))]
    proxy = FastAPI()
    proxy.include_router(ray_proxy_router(lambda ns, name: lookup[-1](ns, name)))
    with serving(_dashboard()) as ray_url, serving(proxy) as url, admin.client(url) as client:
        ports[("team", "train")] = int(ray_url.rsplit(":", 1)[1])
        answer = client.get("/ui/ray/team/train/api/jobs/", params={"limit": "5"})
        assert answer.status_code == 200 and answer.headers["x-ray"] == "1"
        assert answer.json() == {"path": "jobs/", "query": "limit=5", "body": "", "host": ray_url[7:]}
        assert client.post("/ui/ray/team/train/api/stop", content=b"now").json()["body"] == "now"
        moved = client.get("/ui/ray/team/train/old")
        assert moved.status_code == 302 and moved.headers["location"] == "/ui/ray/team/train/api/new"
        bare = client.get("/ui/ray/team/train")
        assert bare.status_code == 307 and bare.headers["location"] == "train/"
        missing = client.get("/ui/ray/team/other/")
        assert missing.status_code == 404 and "RayJob team/other is not running" in missing.text
        closed = free_port()
        asked: list[str] = []

        def going(ns: str, name: str) -> int | None:  # a cluster that stops as its dashboard is asked
            asked.append(name)
            return closed if len(asked) == 1 else None

        lookup.append(going)
        down = client.get("/ui/ray/team/gone/")
        assert down.status_code == 502 and "did not answer" in down.text and len(asked) == 2


def test_a_server_that_runs_no_jobs_says_so() -> None:
    proxy = FastAPI()
    proxy.include_router(ray_proxy_router(None))
    with serving(proxy) as url:
        answer = admin.get(url + "/ui/ray/team/train/")
        assert answer.status_code == 404 and "does not run jobs (--runtime none)" in answer.text


def test_every_answer_under_the_prefix_is_sandboxed() -> None:
    """Whatever answers (the job's dashboard, a redirect, the proxy's own 404 and 502), the page is sandboxed: an
    opaque origin, whose scripts can neither read the dashboard's cookies nor call its API with them."""
    def cookie_setting() -> FastAPI:
        app = _dashboard()

        @app.get("/page")
        async def page() -> Any:
            return HTMLResponse("<html><head></head><body>ray</body></html>",
                                headers={"set-cookie": "flexq-token=theirs; Path=/",
                                         "content-security-policy": "default-src 'self'"})

        return app

    proxy = FastAPI()
    proxy.include_router(ray_proxy_router(lambda ns, name: port if name == "train" else None))
    with serving(cookie_setting()) as ray_url, serving(proxy) as url, admin.client(url) as client:
        port = int(ray_url.rsplit(":", 1)[1])
        answers = [client.get("/ui/ray/team/train/api/jobs/"), client.get("/ui/ray/team/train/old"),
                   client.get("/ui/ray/team/train"), client.get("/ui/ray/team/other/"),
                   client.get("/ui/ray/team/train/page")]
        for answer in answers:
            assert answer.headers.get("content-security-policy", "").endswith(SANDBOX), answer.request.url
        assert [a.status_code for a in answers] == [200, 302, 307, 404, 200]
        page = answers[-1]
        assert page.headers["content-security-policy"] == f"default-src 'self', {SANDBOX}", "both are enforced"
        assert "set-cookie" not in page.headers, "a job's dashboard sets no cookie on the server's origin"


def test_a_capability_opens_one_jobs_dashboard_and_nothing_else(tmp_path: Path) -> None:
    """A browser that opens a job's Ray dashboard is sent on to a capability path, which its sandboxed page's
    requests (no cookies, ``Origin: null``) are authorized by: that job's dashboard alone, until it expires."""
    book = TokenBook(tmp_path)
    token = book.ensure_admin()
    key = capability_key(tmp_path)
    assert key is not None
    proxy = FastAPI()
    proxy.include_router(ray_proxy_router(lambda ns, name: port, lambda ns, name: capability(key, ns, name,
                                                                                            time.time())))

    @proxy.get("/api/v1/namespaces/{namespace}/pods")
    async def pods(namespace: str) -> Any:
        return {"kind": "PodList", "items": []}

    app = RequestGuard(BodyLimit(AuthMiddleware(proxy, Authenticator(book, False))), ["127.0.0.1"])
    with serving(_ray_page()) as ray_url, serving(app) as url:
        port = int(ray_url.rsplit(":", 1)[1])
        bearer = {"Authorization": f"Bearer {token}"}
        opened = httpx.get(f"{url}/ui/ray/team/train/", headers=bearer)
        assert opened.status_code == 307 and opened.headers["location"].startswith("~")
        base = f"{url}/ui/ray/team/train/{opened.headers['location']}"
        sandboxed = {"Origin": "null"}
        page = httpx.get(base, headers=sandboxed)
        assert page.status_code == 200 and page.headers["content-security-policy"] == SANDBOX
        assert page.headers["access-control-allow-origin"] == "*" and page.headers["referrer-policy"] == "no-referrer"
        assert page.text.index("document, \"cookie\"") < page.text.index("ray's own"), "the shim comes first"
        api = httpx.post(base + "api/jobs/", headers={**sandboxed, "Content-Type": "application/json"}, content=b"{}")
        assert api.status_code == 200 and api.json()["path"] == "jobs/", "no cookie needed"
        preflight = httpx.options(base + "api/jobs/", headers={**sandboxed, "Access-Control-Request-Method": "POST",
                                                                "Access-Control-Request-Headers": "content-type"})
        assert preflight.status_code == 204 and "POST" in preflight.headers["access-control-allow-methods"]
        assert preflight.headers["access-control-allow-headers"] == "content-type"
        segment = opened.headers["location"].rstrip("/")
        cookies = {"flexq-token": token}
        refused = {
            "another job's": f"{url}/ui/ray/team/other/{segment}/api/jobs/",
            "another namespace's": f"{url}/ui/ray/other/train/{segment}/api/jobs/",
            "a forged one": f"{url}/ui/ray/team/train/{segment[:-2]}xx/api/jobs/",
            "an expired one": f"{url}/ui/ray/team/train/{capability(key, 'team', 'train', time.time() - LIFETIME - 1)}"
                              "/api/jobs/",
        }
        for what, address in refused.items():
            answer = httpx.get(address, headers=sandboxed, cookies=cookies)
            assert answer.status_code == 403, what
        # From the sandbox, nothing else: not the proxy without a capability, not the API, with cookies or not.
        for address in (f"{url}/ui/ray/team/train/api/jobs/", f"{url}/api/v1/namespaces/default/pods"):
            assert httpx.get(address, headers=sandboxed, cookies=cookies).status_code == 403, address
        assert httpx.get(f"{url}/api/v1/namespaces/default/pods", cookies=cookies).status_code == 200


def _ray_page() -> FastAPI:
    app = _dashboard()

    @app.get("/")
    async def index() -> Any:
        return HTMLResponse("<!doctype html><html><head><title>ray's own</title></head><body></body></html>")

    return app



def _ray_build() -> Path | None:
    """The Ray dashboard's own pages and scripts, as the installed Ray ships them, or None."""
    spec = importlib.util.find_spec("ray")
    if spec is None or spec.origin is None:
        return None
    build = Path(spec.origin).parent / "dashboard" / "client" / "build"
    return build if (build / "index.html").is_file() else None


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
@pytest.mark.skipif(_ray_build() is None, reason="needs Ray's dashboard (pip install 'ray[default]')")
def test_rays_own_dashboard_renders_sandboxed_in_chromium(tmp_path: Path) -> None:
    """Ray's own dashboard (its pages and scripts; its API a stand-in's), opened from a signed-in dashboard session:
    it renders and reads its API, in an opaque origin that sees no cookie and cannot call flexq's API."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (the dev extra)")
    from tests.server.test_dashboard import BROWSER_ARGS

    build = _ray_build()
    assert build is not None
    seen: list[tuple[str, int, bool]] = []
    ray = FastAPI()

    @ray.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:
        answer = await call_next(request)
        seen.append((request.url.path, answer.status_code, "cookie" in request.headers))
        return answer

    @ray.api_route("/{path:path}", methods=["GET", "POST"])
    async def api(path: str) -> Any:
        if path.startswith("static/") or path in ("", "favicon.ico"):
            return FileResponse(build / (path or "index.html"))
        return JSONResponse({"result": True, "msg": "", "data": {}})

    book = TokenBook(tmp_path)
    token = book.ensure_admin()
    key = capability_key(tmp_path)
    assert key is not None
    proxy = FastAPI()
    proxy.include_router(ray_proxy_router(lambda ns, name: port, lambda ns, name: capability(key, ns, name,
                                                                                            time.time())))
    app = RequestGuard(BodyLimit(AuthMiddleware(proxy, Authenticator(book, False))), ["127.0.0.1"])
    errors: list[str] = []
    with serving(ray) as ray_url, serving(app) as url, sync_api.sync_playwright() as p:
        port = int(ray_url.rsplit(":", 1)[1])
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{url}/ui/?token={token}")  # signs in: the session's cookies
            assert {c["name"] for c in page.context.cookies()} == {"flexq-token", "flexq-csrf"}
            page.goto(f"{url}/ui/ray/team/train/")
            assert "/ui/ray/team/train/~" in page.url
            page.wait_for_function("document.getElementById('root').childElementCount > 0", timeout=30_000)
            page.wait_for_timeout(1500)  # its first API calls
            assert page.evaluate("window.origin") == "null", "an opaque origin"
            assert page.evaluate("document.cookie") == ""
            reached = page.evaluate("""fetch('/api/v1/namespaces/default/pods', {credentials: 'include'})
                                         .then(r => String(r.status), () => 'refused')""")
            assert reached == "refused"
        finally:
            browser.close()
    assert not [e for e in errors if "SecurityError" in e], errors
    assert any(path.startswith("/static/js/main") and code == 200 for path, code, _ in seen), seen
    assert any(path.startswith("/api/") and code == 200 for path, code, _ in seen), seen
    assert not any(cookie for _, _, cookie in seen), "the job's dashboard never sees the server's cookies"
