"""The web screen's cross-site request protection (servicekit/csrf.py) over the real stack: a page served
from another port of the same host (cookies are not kept apart by port, and SameSite counts it as the
same site) that makes a signed-in person's real browser post a Forget; a form token tried in another
session than its own; the flags of every cookie the screen sets, read from its Set-Cookie headers,
over http and behind a TLS proxy; and direct posts from foreign origins. Each refusal is a 403 page
and the memory is still there."""

from __future__ import annotations

import http.server
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

import grpc
import pytest
from conftest import code_of, free_port, sign_in
from playwright.sync_api import expect

from servicekit.csrf import SESSION_COOKIE, TOKEN_COOKIE

FOREIGN = "Refused: this form was sent from another site"
NO_TOKEN = "Refused: this form did not carry the cross-site request token of your session"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@dataclass
class Answer:
    status: int
    set_cookies: list[str]
    text: str


@dataclass
class Client:
    """A client that is not a browser: it sends only the headers it is given, keeps the cookies the
    screen sets (whatever their Secure flag: it may be talking to the screen as if through a TLS
    proxy) and follows no redirect."""

    base: str
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)

    def request(self, method: str, path: str, form: dict | None = None, headers: dict | None = None) -> Answer:
        data = None if form is None else urllib.parse.urlencode(form).encode()
        req = urllib.request.Request(f"{self.base}{path}", data=data, method=method)
        for name, value in {**self.headers, **(headers or {})}.items():
            req.add_header(name, value)
        if self.cookies:
            req.add_header("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            resp = opener.open(req, timeout=60)
        except urllib.error.HTTPError as exc:
            resp = exc
        answer = Answer(resp.status, resp.headers.get_all("set-cookie") or [], resp.read().decode())
        for line in answer.set_cookies:
            name, _, rest = line.partition("=")
            value, _, flags = rest.partition(";")
            if "max-age=0" in flags.lower():
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        return answer

    def get(self, path: str, **kw) -> Answer:
        return self.request("GET", path, **kw)

    def post(self, path: str, form: dict, **kw) -> Answer:
        return self.request("POST", path, form=form, **kw)

    def form_token(self, path: str = "/search") -> str:
        page = self.get(path).text
        return re.search(r'name="csrftoken" value="([^"]*)"', page).group(1)

    def sign_in(self, token: str) -> Answer:
        answer = self.post("/login", {"csrftoken": self.form_token("/login"), "token": token})
        assert answer.status == 303, answer.text
        return answer

    def forget(self, memory_id: str, csrftoken: str, **kw) -> Answer:
        return self.post("/expiring/forget", {"id": memory_id, "reason": "csrf test", "csrftoken": csrftoken}, **kw)


def there(member, memory_id: str) -> bool:
    return code_of(member.read, memory_id) == grpc.StatusCode.OK


@pytest.fixture(scope="module")
def crew(stack):
    ws = stack.workspace("web csrf")
    return stack.member(ws), stack.member(ws)


@pytest.fixture
def attacker_site():
    """A web server on another loopback port; ``serve(html, set_cookies)`` sets the page it gives
    (with those Set-Cookie headers) and returns its address."""
    served: dict = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = served["html"].encode()
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            for cookie in served["cookies"]:
                self.send_header("set-cookie", cookie)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def serve(html: str, set_cookies: list[str]) -> str:
        served.update(html=html, cookies=set_cookies)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield serve
    server.shutdown()
    thread.join(timeout=30)


@pytest.mark.browser
def test_a_page_on_another_port_cannot_make_the_browser_forget(stack, web_screen, page, crew, attacker_site):
    """The attack as it worked: a server on another port of the same host fetches the screen's login
    page for a session and form token of its own, gives the person's browser that session's cookies
    (cookies are per host, not per port) and a page that posts a Forget with its token at once. The
    browser sends the person's cookies along (same site), and says where the form came from."""
    alice, _ = crew
    memory = alice.remember("The spare key hangs behind the blue shutter.", title="Spare key")
    sign_in(page, web_screen, alice.token)
    expect(page.get_by_role("heading", level=1)).to_have_text("Search")

    own = Client(web_screen)
    token = own.form_token("/login")
    tossed = [f"{name}={value}; Path=/" for name, value in own.cookies.items()]
    html = (
        f'<form method="post" action="{web_screen}/expiring/forget">'
        f'<input name="id" value="{memory.id}"><input name="reason" value="gone">'
        f'<input name="csrftoken" value="{token}"></form>'
    )
    script = '<script>addEventListener("load", () => document.forms[0].submit())</script>'
    with page.expect_response(f"{web_screen}/expiring/forget") as posted:
        page.goto(attacker_site(html + script, tossed))
        page.wait_for_url(f"{web_screen}/expiring/forget")
    assert posted.value.status == 403
    expect(page.locator("#error")).to_have_text(re.compile(rf"^{FOREIGN} \(Sec-Fetch-Site: same-site\)"))
    assert there(alice, memory.id)

    # The same post with no script and a click (a person fooled into it): the same refusal.
    page.goto(attacker_site(html.replace("</form>", "<button>Win a prize</button></form>"), tossed))
    with page.expect_response(f"{web_screen}/expiring/forget") as posted:
        page.get_by_role("button", name="Win a prize").click()
    assert posted.value.status == 403 and there(alice, memory.id)

    # The person is still signed in and the screen's own form still works.
    page.goto(f"{web_screen}/memories/{memory.id}")
    expect(page.locator("h1")).to_have_text("Spare key")


def test_a_form_token_works_only_in_its_own_session(stack, web_screen, crew):
    """A form token is bound to the session that was shown it: a session id cookie and the member
    token cookie. Another session's token is refused, even when its session cookie is planted
    alongside the person's member token (a server on another port can plant cookies), and a page
    shown before signing in or out carries a token that no longer works."""
    alice, bob = crew
    memory = alice.remember("The boat is moored at pontoon C.", title="Mooring")

    person = Client(web_screen)
    person.sign_in(alice.token)
    other = Client(web_screen)
    other.sign_in(bob.token)
    assert person.cookies[SESSION_COOKIE] != other.cookies[SESSION_COOKIE]
    their_token = other.form_token()
    assert their_token != person.form_token()

    answer = person.forget(memory.id, their_token)
    assert answer.status == 403 and NO_TOKEN in answer.text

    # Every cookie of the other session but the member token, with that session's own token.
    planted = Client(web_screen, cookies={**other.cookies, TOKEN_COOKIE: alice.token})
    answer = planted.forget(memory.id, their_token)
    assert answer.status == 403 and NO_TOKEN in answer.text

    # The same member signed in twice: two sessions, two tokens.
    twin = Client(web_screen)
    twin.sign_in(alice.token)
    assert twin.forget(memory.id, person.form_token()).status == 403

    # A page from before signing in: its token belonged to the signed-out session.
    late = Client(web_screen)
    before = late.form_token("/login")
    late.post("/login", {"csrftoken": before, "token": alice.token})
    answer = late.forget(memory.id, before)
    assert answer.status == 403 and NO_TOKEN in answer.text

    # Bad tokens of every shape, and none: refused, nothing called.
    for bad in ("", "x", "ü" * 40, "0" * 64, person.form_token().upper(), "a" * 100_000):
        assert person.forget(memory.id, bad).status == 403
    assert person.post("/expiring/forget", {"id": memory.id}).status == 403
    assert person.post("/expiring/forget", {"id": memory.id, "csrftoken": "x" * 300_000}).status == 413
    no_session = Client(web_screen, cookies={TOKEN_COOKIE: alice.token})
    assert no_session.forget(memory.id, person.form_token()).status == 403
    assert there(alice, memory.id)

    # Its own token works; after signing out, it does not.
    token = person.form_token()
    answer = person.forget(memory.id, token)
    assert answer.status == 200 and f"Forgot 1 memory(ies): {memory.id}" in answer.text
    assert not there(alice, memory.id)
    kept = alice.remember("The dinghy is kept in the shed.", title="Dinghy")
    assert person.post("/logout", {"csrftoken": token}).status == 303
    person.cookies[TOKEN_COOKIE] = alice.token  # signed in again by the cookie alone: a new session
    assert person.forget(kept.id, token).status == 403 and there(alice, kept.id)


def _flags(set_cookie: str) -> dict[str, str]:
    parts = [p.strip() for p in set_cookie.split(";")]
    return {p.partition("=")[0].lower(): p.partition("=")[2].lower() for p in parts[1:]}


@pytest.mark.parametrize("tls", [False, True], ids=["http", "behind-a-tls-proxy"])
def test_every_cookie_is_httponly_strict_and_secure_over_tls(web_screen, crew, tls):
    """Every Set-Cookie of a visit (the login page, a refused sign-in, a sign-in, a page, a sign-out)
    is HttpOnly (no script of the screen reads one: its pages load none), SameSite=Strict, Path=/;
    Secure when the request came over TLS, here as a proxy on 127.0.0.1 says it with X-Forwarded-Proto
    (uvicorn's FORWARDED_ALLOW_IPS)."""
    alice, _ = crew
    host = web_screen.removeprefix("http://")
    headers = {"X-Forwarded-Proto": "https", "Origin": f"https://{host}"} if tls else {}
    client = Client(web_screen, headers=headers)
    seen = client.get("/login").set_cookies
    token = client.form_token("/login")
    seen += client.post("/login", {"csrftoken": token, "token": "rct_not-a-token"}).set_cookies
    client.cookies[TOKEN_COOKIE] = "rct_not-a-token"  # a cookie the next page clears
    seen += client.get("/login").set_cookies
    seen += client.sign_in(alice.token).set_cookies
    assert client.get("/search").status == 200
    seen += client.post("/logout", {"csrftoken": client.form_token()}).set_cookies
    names = {line.partition("=")[0] for line in seen}
    assert {SESSION_COOKIE, TOKEN_COOKIE} <= names
    for line in seen:
        flags = _flags(line)
        assert "httponly" in flags, line
        assert flags.get("samesite") == "strict", line
        assert flags.get("path") == "/", line
        assert ("secure" in flags) == tls, line


def test_a_post_from_a_foreign_origin_is_refused(web_screen, crew):
    """A signed-in session with its right token, sent with a foreign Sec-Fetch-Site or Origin: 403 with
    a page naming what was refused, nothing called. Sec-Fetch-Site must be same-origin; without it,
    Origin must be exactly the screen's scheme, host and port; a client that sends neither is no
    browser, and its token alone decides."""
    alice, _ = crew
    memory = alice.remember("The generator fuel is in the red can.", title="Fuel")
    client = Client(web_screen)
    client.sign_in(alice.token)
    token = client.form_token()
    host = web_screen.removeprefix("http://")
    port = host.rpartition(":")[2]
    foreign = [
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Sec-Fetch-Site": "none"},
        {"Sec-Fetch-Site": ""},
        {"Sec-Fetch-Site": "cross-site", "Origin": web_screen},
        {"Origin": f"http://127.0.0.1:{free_port()}"},
        {"Origin": "null"},
        {"Origin": f"https://{host}"},
        {"Origin": f"http://localhost:{port}"},
        {"Origin": f"{web_screen}.evil.example"},
        {"Origin": f"{web_screen}/"},
        {"Origin": "ÿ" * 5000},
    ]
    for headers in foreign:
        answer = client.forget(memory.id, token, headers=headers)
        assert answer.status == 403, headers
        assert FOREIGN in answer.text and "Nothing was changed" in answer.text, headers
    for method in ("PUT", "PATCH", "DELETE"):
        form = {"id": memory.id, "csrftoken": token}
        answer = client.request(method, "/expiring/forget", form=form, headers={"Origin": "http://evil.example"})
        assert answer.status == 403 and FOREIGN in answer.text, method
    assert "(Origin: http://evil.example)" in answer.text
    assert there(alice, memory.id)

    for headers in ({"Sec-Fetch-Site": "same-origin", "Origin": web_screen}, {"Origin": web_screen}, {}):
        kept = alice.remember(f"A note to forget with {sorted(headers)}.", title="Note")
        answer = client.forget(kept.id, token, headers=headers)
        assert answer.status == 200 and f"Forgot 1 memory(ies): {kept.id}" in answer.text, headers
        assert not there(alice, kept.id)
