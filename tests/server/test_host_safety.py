"""What a web page or another local user can do through a server on the user's machine: nothing.

Cross-site requests (a ``text/plain`` POST, a form, a foreign Origin) and DNS-rebinding requests (a Host of another
site's) are refused before authentication, whatever the mode; the dashboard's cookie session needs its CSRF token to
write; a default server requires a token on loopback too.
"""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import admin
from tests.conftest import Server, start_server, stop_server

PODS = "/api/v1/namespaces/default/pods"


def _pod(name: str, marker: Path) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", f"echo hi > {marker}"],
                                     "resources": {"requests": {"cpu": "1"}}}]}}


def _pods(server: Server) -> list[str]:
    listed = admin.get(server.url + PODS)
    assert listed.status_code == 200, listed.text
    return [p["metadata"]["name"] for p in listed.json()["items"]]


@pytest.fixture
def anonymous(tmp_path: Path) -> Iterator[Server]:
    """The most open server there is (anonymous mode): what a page cannot do here, it cannot do anywhere."""
    srv = start_server(tmp_path / "home", "--auth", "anonymous")
    try:
        yield srv
    finally:
        stop_server(srv)


def test_the_cross_site_and_rebinding_requests_are_refused(server: Server, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    body = json.dumps(_pod("x", marker))
    # The two requests on a default server: refused before anything reads them.
    cross_site = httpx.post(server.url + PODS, content=body,
                            headers={"Origin": "http://evil.example", "Content-Type": "text/plain"})
    assert cross_site.status_code == 403 and cross_site.json()["reason"] == "Forbidden"
    assert "http://evil.example" in cross_site.json()["message"]
    port = server.url.rsplit(":", 1)[1]
    rebound = httpx.get(server.url + PODS, headers={"Host": f"evil.example:{port}"})
    assert rebound.status_code == 403 and "evil.example" in rebound.json()["message"]
    # A token does not make the rest acceptable: each check holds on its own.
    cases: dict[str, tuple[dict[str, str], int, str]] = {
        "text/plain": ({"Content-Type": "text/plain"}, 415, "UnsupportedMediaType"),
        "form": ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "UnsupportedMediaType"),
        "multipart": ({"Content-Type": "multipart/form-data; boundary=x"}, 415, "UnsupportedMediaType"),
        "foreign origin": ({"Content-Type": "application/json", "Origin": "http://evil.example"}, 403, "Forbidden"),
        "null origin": ({"Content-Type": "application/json", "Origin": "null"}, 403, "Forbidden"),
        "other port": ({"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}, 403, "Forbidden"),
        "rebinding": ({"Content-Type": "application/json", "Host": "evil.example"}, 403, "Forbidden"),
    }
    seen = {}
    for case, (headers, _code, _reason) in cases.items():
        answer = admin.post(server.url + PODS, content=body, headers={**headers, **server.headers})
        seen[case] = (answer.status_code, answer.json().get("reason"))
    assert seen == {case: (code, reason) for case, (_h, code, reason) in cases.items()}
    assert _pods(server) == [] and not marker.exists()
    # Reads too, from another origin; the GKE API answers in Google's words.
    foreign = {"Origin": "http://evil.example", **server.headers}
    assert admin.get(server.url + PODS, headers=foreign).status_code == 403
    gke = admin.get(server.url + "/v1/projects/demo/locations/us-east5-b/clusters", headers=foreign)
    assert gke.status_code == 403 and gke.json()["error"]["status"] == "PERMISSION_DENIED"
    # What the server's own clients send is served: no Origin, the same origin, JSON, YAML, a patch type.
    same_origin = {"Origin": server.url, **server.headers}
    assert admin.get(server.url + PODS, headers=same_origin).status_code == 200
    yaml_pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: y}\nspec: {containers: [{name: c, image: app}]}\n"
    made = admin.post(server.url + PODS, content=yaml_pod, headers={"Content-Type": "application/yaml; charset=utf-8"})
    assert made.status_code == 201, made.text
    patched = admin.patch(f"{server.url}{PODS}/y", content=b'{"metadata":{"labels":{"a":"b"}}}',
                          headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text


def test_a_default_server_requires_a_token_on_loopback_and_its_cli_presents_one(server: Server, flexq: Any) -> None:
    refused = httpx.post(server.url + PODS, json=_pod("x", Path("/nonexistent")))
    assert refused.status_code == 401 and refused.json()["reason"] == "Unauthorized"
    assert httpx.get(server.url + "/ui/").status_code == 401
    assert flexq("get", "clusterqueues").code == 0, "the CLI presents the administrator's token from its file"


def test_allowed_host_names_another_name(tmp_path: Path) -> None:
    srv = start_server(tmp_path / "home", "--allowed-host", "flexq.internal")
    try:
        port = srv.url.rsplit(":", 1)[1]
        named = {**srv.headers, "Host": f"flexq.internal:{port}"}
        assert admin.get(srv.url + PODS, headers=named).status_code == 200
        assert admin.get(srv.url + PODS, headers={**named, "Host": "other.internal"}).status_code == 403
        assert admin.get(srv.url + PODS, headers={**named, "Host": f"localhost:{port}"}).status_code == 200
    finally:
        stop_server(srv)


def test_the_dashboards_cookie_session_writes_only_with_its_csrf_token(server: Server) -> None:
    signed = httpx.get(f"{server.url}/ui/?token={server.token}", follow_redirects=False)
    assert signed.status_code == 303
    cookies = httpx.Cookies()
    for header in signed.headers.get_list("set-cookie"):
        name, _, rest = header.partition("=")
        cookies.set(name, rest.split(";")[0])
        assert "SameSite=Strict" in header
    csrf = cookies.get("flexq-csrf")
    assert csrf and cookies.get("flexq-token") == server.token
    assert httpx.get(server.url + PODS, cookies=cookies).status_code == 200, "reads need no CSRF token"
    pod = json.dumps(_pod("z", Path("/nonexistent")))
    without = httpx.post(server.url + PODS, content=pod, cookies=cookies, headers={"Content-Type": "application/json"})
    assert without.status_code == 403 and "CSRF" in without.json()["message"]
    wrong = httpx.post(server.url + PODS, content=pod, cookies=cookies,
                       headers={"Content-Type": "application/json", "X-CSRF-Token": "guessed"})
    assert wrong.status_code == 403
    right = httpx.post(server.url + PODS, content=pod, cookies=cookies,
                       headers={"Content-Type": "application/json", "X-CSRF-Token": csrf})
    assert right.status_code == 201, right.text


def test_the_csrf_token_is_given_to_the_dashboards_own_pages_alone(server: Server) -> None:
    """No page's script reads the session's CSRF token from its cookie (HttpOnly): the server writes it into the
    dashboard's own pages, for their writes."""
    signed = httpx.get(f"{server.url}/ui/?token={server.token}", follow_redirects=False)
    made = {header.partition("=")[0]: header for header in signed.headers.get_list("set-cookie")}
    assert set(made) == {"flexq-token", "flexq-csrf"}
    for header in made.values():
        assert "; HttpOnly" in header and "SameSite=Strict" in header, header
    csrf = made["flexq-csrf"].partition("=")[2].split(";")[0]
    cookies = {"flexq-token": server.token, "flexq-csrf": csrf}
    page = httpx.get(f"{server.url}/ui/jobs", cookies=cookies)
    assert page.status_code == 200 and f'<meta name="flexq-csrf" content="{csrf}">' in page.text
    assert page.headers["cache-control"] == "no-store"
    assert 'name="flexq-csrf"' not in admin.get(f"{server.url}/ui/jobs").text, "no session, no token"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _serving(html: str) -> Callable[[Any], None]:
    """A route handler that answers with ``html`` (the attacker's page, at an address no server holds)."""
    def fulfil(route: Any) -> None:
        route.fulfill(status=200, content_type="text/html", body=html)
    return fulfil


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_a_page_from_another_origin_cannot_create_anything_in_chromium(anonymous: Server, tmp_path: Path) -> None:
    """A page of another site (another origin: another port), then a DNS-rebinding page (the server's port under a
    name of the attacker's), each try what a browser lets any page send; nothing is created, nothing runs."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (the dev extra)")
    from tests.server.test_dashboard import BROWSER_ARGS

    marker = tmp_path / "ran"
    body = json.dumps(_pod("x", marker))
    port = anonymous.url.rsplit(":", 1)[1]
    attacks = f"""<!doctype html><form id=f method=post enctype=text/plain action="TARGET{PODS}">
      <input name='{body[:-1]}, "x": "' value='"}}'></form>
      <script>
      window.tried = (async () => {{
        const body = {json.dumps(body)};
        const answers = [];
        for (const init of [
          {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body}},
          {{method: "POST", mode: "no-cors", body: new Blob([body])}},
          {{method: "POST", headers: {{"Content-Type": "application/json"}}, body}},
        ]) {{
          try {{ const r = await fetch("TARGET{PODS}", init); answers.push(r.type + ":" + r.status); }}
          catch (e) {{ answers.push("refused"); }}
        }}
        return answers;
      }})();
      </script>"""
    pages = {f"http://127.0.0.1:{int(port) + 7}/attack.html": anonymous.url,  # another origin
             f"http://evil.example:{port}/attack.html": f"http://evil.example:{port}"}  # rebinding: same origin
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=[*BROWSER_ARGS, "--host-resolver-rules=MAP evil.example 127.0.0.1"])
        try:
            for address, target in pages.items():
                page = browser.new_page()
                page.route(address, _serving(attacks.replace("TARGET", target)))
                page.goto(address)
                answers = page.evaluate("window.tried")
                assert all(a in ("refused", "opaque:0", "basic:403", "cors:403") for a in answers), answers
                page.evaluate("document.getElementById('f').submit()")
                page.wait_for_load_state()
                page.close()
            # What a rebinding page reaches once its name points here: the server, which refuses the name.
            page = browser.new_page()
            rebound = page.goto(f"http://evil.example:{port}{PODS}")
            assert rebound is not None and rebound.status == 403 and "DNS rebinding" in rebound.text()
        finally:
            browser.close()
    assert _pods(anonymous) == [] and not marker.exists()


def test_what_holds_a_secret_is_the_users_alone(server: Server, flexq: Any, tmp_path: Path) -> None:
    modes = {}
    written = tmp_path / "config" / "kubeconfig"
    assert flexq("kubeconfig", "--write", str(written)).code == 0
    assert flexq("env").code == 0
    for path in [server.home, server.home / "auth", server.home / "tls", server.home / "auth" / "admin.token",
                 server.home / "tls" / "ca.key", server.home / "flexq.db", server.home / "kubeconfig",
                 server.home / "gcloud", server.home / "gcloud" / "access-token", written, written.parent]:
        modes[str(path.relative_to(tmp_path))] = oct(stat.S_IMODE(path.stat().st_mode))
    folders = {"home", "home/auth", "home/tls", "home/gcloud", "config"}
    assert modes == {name: "0o700" if name in folders else "0o600" for name in modes}
    # flexq's own `container clusters get-credentials` writes the same kubeconfig, token and all: 0600 too.
    (server.home / "kubeconfig").unlink()
    assert flexq("container", "clusters", "create", "tpu", "--location", "us-east5-b").code == 0
    made = flexq("container", "clusters", "get-credentials", "tpu", "--location", "us-east5-b")
    assert made.code == 0, made.err
    assert oct(stat.S_IMODE((server.home / "kubeconfig").stat().st_mode)) == "0o600"
