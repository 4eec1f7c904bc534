"""The Ray dashboard proxy against a stand-in dashboard: paths, queries, bodies and redirects pass through; a job
with no running cluster, or a dashboard that does not answer, gets a reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse

from flexq.server.rayproxy import ray_proxy_router
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
