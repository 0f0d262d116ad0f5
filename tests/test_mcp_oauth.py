"""OAuth 2.1 sign-in for `recallatron mcp --http` (mcp_server/oauth.py), against the real stack: the
MCP SDK's own client OAuth support drives the flow (discovery from the 401, registration, PKCE, token,
refresh), and the test answers the consent page as the person's browser would, with httpx. Each
endpoint also gets bad input, answered with the OAuth error that names it."""

from __future__ import annotations

import base64
import hashlib
import re
import time
from urllib.parse import parse_qs, urlsplit

import anyio
import grpc
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from starlette.applications import Starlette
from test_mcp import free_port, gateway_addr, text_of
from test_mcp_http import INITIALIZE, cli_main, post, serve_http

import client
from mcp_server import oauth

REDIRECT = "http://127.0.0.1:9/callback"


class Storage:
    """The SDK client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


class Browser:
    """The person's browser: follows /authorize to the consent page and answers it (httpx, cookies kept)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = httpx2.Client(timeout=60)

    def open_consent(self, authorization_url: str) -> tuple[str, dict]:
        """GET the authorization URL, then the consent page it sends to: (page, its form's hidden fields)."""
        first = self.http.get(authorization_url)
        assert first.status_code == 302, (first.status_code, first.text)
        page = self.http.get(first.headers["location"])
        assert page.status_code == 200, page.text
        assert page.headers["x-frame-options"] == "DENY"
        hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page.text))
        return page.text, hidden

    def answer(self, hidden: dict, member_token: str, purposes=("conversation",), decision="allow", **headers):
        form = {**hidden, "member_token": member_token, "purpose": list(purposes), "decision": decision}
        return self.http.post(self.base + "/oauth/consent", data=form, headers={"Origin": self.base, **headers})


def sdk_client(url: str, browser: Browser, member_token: str, purposes=("conversation",), seen=None):
    """The SDK's OAuthClientProvider, its redirect answered by ``browser`` as ``member_token``."""
    answered = {}

    async def redirect_handler(authorization_url: str) -> None:
        def consent():
            page, hidden = browser.open_consent(authorization_url)
            if seen is not None:
                seen.append(page)
            return browser.answer(hidden, member_token, purposes)

        response = await anyio.to_thread.run_sync(consent)
        assert response.status_code == 303, (response.status_code, response.text)
        answered["location"] = response.headers["location"]

    async def callback_handler() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(answered["location"]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query["iss"][0])

    metadata = OAuthClientMetadata(
        client_name="Test Agent <b>",
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(url, metadata, Storage(), redirect_handler, callback_handler)


def run(url: str, auth, session):
    async def main():
        async with httpx2.AsyncClient(auth=auth, timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await session(client)

    return anyio.run(main)


async def recall(client, query: str) -> str:
    result = await client.call_tool("recallatron_recall", {"query": query})
    assert not result.is_error, text_of(result)
    return text_of(result)


def token_request(base: str, **form) -> httpx2.Response:
    return httpx2.post(base + "/token", data=form, timeout=60)


@pytest.fixture(scope="module")
def workspace(stack):
    return stack.workspace("mcp-oauth")


@pytest.fixture(scope="module")
def server(stack):
    """`recallatron mcp --http 127.0.0.1:PORT`: a loopback bind, so OAuth names http://127.0.0.1:PORT."""
    with serve_http(stack, "127.0.0.1") as (url, port):
        yield url, f"http://127.0.0.1:{port}"


def test_the_resource_and_the_authorization_server_describe_themselves(server):
    url, base = server
    missing = post(url, None, INITIALIZE)
    assert missing.status_code == 401
    challenge = f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
    assert missing.headers["www-authenticate"] == challenge
    for bad in ("rcm_not_issued_here", "rcm_" + "x" * 5000, "rct_not_a_member"):
        refused = post(url, bad, INITIALIZE)
        assert refused.status_code == 401 and "mcp-session-id" not in refused.headers
        assert refused.headers["www-authenticate"].startswith('Bearer error="invalid_token", resource_metadata=')
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        resource = httpx2.get(base + path).json()
        assert resource["resource"] == url
        assert resource["authorization_servers"] == [base + "/"] or resource["authorization_servers"] == [base]
        assert resource["scopes_supported"] == ["conversation", "tasks", "reporting", "administration"]
    server_metadata = httpx2.get(base + "/.well-known/oauth-authorization-server").json()
    assert server_metadata["code_challenge_methods_supported"] == ["S256"]
    assert server_metadata["registration_endpoint"] == base + "/register"
    assert server_metadata["grant_types_supported"] == ["authorization_code", "refresh_token"]


def test_sign_in_consent_tool_call_refresh_and_revocation(stack, workspace, server):
    url, base = server
    alice, bob = stack.member(workspace), stack.member(workspace)
    alice.remember("Alice keeps the kestrelwood key under the blue pot.", audience=m.AUDIENCE_MEMBER)
    bob.remember("Bob's kestrelwood safe code is 5521.", audience=m.AUDIENCE_MEMBER)
    alice.remember("Alice's kestrelwood task list.", audience=m.AUDIENCE_MEMBER, purpose=m.PURPOSE_TASKS)
    browser, pages = Browser(base), []
    auth = sdk_client(url, browser, alice.token, seen=pages)

    # The SDK meets the 401, discovers, registers, sends the person to consent, exchanges the code.
    found = run(url, auth, lambda client: recall(client, "kestrelwood"))
    assert "blue pot" in found and "5521" not in found  # Bob's member-only memory never reaches Alice
    assert "task list" not in found  # only the purpose the person ticked
    assert "Test Agent &lt;b&gt;" in pages[0] and REDIRECT in pages[0]  # the page names the client, escaped
    tokens = auth.context.storage.tokens
    assert tokens.access_token.startswith("rcm_") and tokens.refresh_token.startswith("rcr_")
    assert tokens.scope == "conversation" and 0 < tokens.expires_in <= 3600
    for token in (tokens.access_token, tokens.refresh_token):
        assert alice.token not in token and alice.token[4:] not in token
    # The access token is for this resource alone, and acts as Alice with that purpose only.
    tasks = {"jsonrpc": "2.0", "id": 5, "method": "tools/call"}
    tasks["params"] = {"name": "recallatron_recall", "arguments": {"query": "kestrelwood", "purpose": "tasks"}}
    opened = post(url, tokens.access_token, INITIALIZE)
    assert opened.status_code == 200
    denied = post(
        url, tokens.access_token, tasks, opened.headers["mcp-session-id"], **{"Mcp-Protocol-Version": "2025-06-18"}
    )
    assert "PERMISSION_DENIED" in denied.text and "task list" not in denied.text

    # Refresh: the SDK refreshes an expired token; the refresh token rotates, the old one is spent.
    spent = tokens.refresh_token
    auth.context.token_expiry_time = time.time() - 1
    again = run(url, auth, lambda client: recall(client, "kestrelwood"))
    assert "blue pot" in again
    fresh = auth.context.storage.tokens
    assert fresh.refresh_token != spent and fresh.access_token != tokens.access_token
    assert post(url, tokens.access_token, INITIALIZE).status_code == 401  # the old access token went with it
    client_id = auth.context.storage.client.client_id
    reused = token_request(base, grant_type="refresh_token", refresh_token=spent, client_id=client_id)
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    # A spent refresh token presented again revokes its grant: the fresh tokens stop too.
    assert post(url, fresh.access_token, INITIALIZE).status_code == 401

    # A member token keeps working as a bearer on the same server.
    assert post(url, bob.token, INITIALIZE).status_code == 200

    # Sign in again, then the operator revokes Alice: her OAuth token stops at its next request, and
    # its refresh is refused.
    auth = sdk_client(url, Browser(base), alice.token)
    assert "blue pot" in run(url, auth, lambda client: recall(client, "kestrelwood"))
    live = auth.context.storage.tokens
    assert post(url, live.access_token, INITIALIZE).status_code == 200
    stack.admin.RevokeMember(g.RevokeMemberRequest(workspace_id=workspace, member_id=alice.id), metadata=stack.op())
    assert post(url, live.access_token, INITIALIZE).status_code == 401
    client_id = auth.context.storage.client.client_id
    refused = token_request(base, grant_type="refresh_token", refresh_token=live.refresh_token, client_id=client_id)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"


def register(base: str, **metadata) -> httpx2.Response:
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "client_name": "raw"} | metadata
    return httpx2.post(base + "/register", json=body, timeout=60)


def pkce() -> tuple[str, str]:
    verifier = "v" * 20 + base64.urlsafe_b64encode(hashlib.sha256(str(time.time_ns()).encode()).digest()).decode()
    verifier = verifier.rstrip("=")
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def authorize_url(base: str, client: str, challenge: str, **extra) -> str:
    params = {
        "response_type": "code",
        "client_id": client,
        "redirect_uri": REDIRECT,
        "state": "st-123",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": base + "/mcp",
    } | extra
    return str(httpx2.URL(base + "/authorize", params={k: v for k, v in params.items() if v is not None}))


def test_registration_refuses_bad_metadata(server):
    _, base = server
    assert register(base).status_code == 201
    for bad in (
        {"redirect_uris": ["javascript:alert(1)"]},
        {"redirect_uris": ["http://evil.example.test/cb"]},  # plain http off the loopback
        {"redirect_uris": ["https://app.example.test/cb#fragment"]},
        {"redirect_uris": [f"https://app.example.test/{i}" for i in range(11)]},
        {"redirect_uris": []},
    ):
        refused = register(base, **bad)
        assert refused.status_code == 400 and refused.json()["error"] in (
            "invalid_redirect_uri",
            "invalid_client_metadata",
        )
    for bad in ({"scope": "conversation root"}, {"client_name": "x" * 201}, {"grant_types": ["client_credentials"]}):
        refused = register(base, **bad)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_client_metadata", refused.text
    for body in (b"not json", b"{" * 10_000, b"\xff\xfe"):
        refused = httpx2.post(base + "/register", content=body, timeout=60)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_client_metadata"
    assert (
        httpx2.post(base + "/register", content=b" " * (DEFAULT_MAX_REQUEST_BODY_SIZE + 1), timeout=60).status_code
        == 413
    )


def test_authorize_consent_and_token_refuse_bad_input(stack, workspace, server):
    url, base = server
    carol = stack.member(workspace, purposes=[m.PURPOSE_CONVERSATION, m.PURPOSE_TASKS])
    client_id = register(base).json()["client_id"]
    verifier, challenge = pkce()
    browser = Browser(base)

    # /authorize: what cannot be redirected is a 400 here; the rest goes back to the client with state.
    for params in ({"client_id": "no-such-client"}, {"redirect_uri": "http://127.0.0.1:9/other"}):
        refused = browser.http.get(authorize_url(base, client_id, challenge, **params))
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_request", refused.text
    for params, error in (
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": None}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"resource": "https://elsewhere.example.test/mcp"}, "invalid_target"),
        ({"scope": "conversation root"}, "invalid_scope"),
    ):
        refused = browser.http.get(authorize_url(base, client_id, challenge, **params))
        assert refused.status_code == 302, (params, refused.text)
        query = parse_qs(urlsplit(refused.headers["location"]).query)
        assert refused.headers["location"].startswith(REDIRECT)
        assert query["error"] == [error] and query["state"] == ["st-123"], (params, query)

    # The consent page: a form from elsewhere or without its token changes nothing.
    page, hidden = browser.open_consent(authorize_url(base, client_id, challenge))
    assert "conversation" in page and 'type="password"' in page
    foreign = browser.answer(hidden, carol.token, Origin="https://evil.example.test")
    assert foreign.status_code == 403
    assert browser.answer({**hidden, "csrftoken": "forged"}, carol.token).status_code == 403
    stranger = Browser(base)  # another browser: its session's token differs
    stranger.http.get(base + "/oauth/consent?request=x")
    assert stranger.answer(hidden, carol.token).status_code == 403
    # Bad answers re-show the page and keep the request.
    for token, purposes, status in (
        ("rct_not_a_member", ["conversation"], 401),
        ("", ["conversation"], 400),
        ("rct_\x01", ["conversation"], 400),
        ("x" * 5000, ["conversation"], 400),
        (carol.token, [], 400),
        (carol.token, ["reporting"], 403),  # not granted to Carol's token
        (carol.token, ["root"], 400),
    ):
        answered = browser.answer(hidden, token, purposes)
        assert answered.status_code == status, (token[:10], purposes, answered.status_code, answered.text)
        assert "Allow" in answered.text
    assert browser.answer(hidden, carol.token, decision="maybe").status_code == 400
    assert browser.answer({**hidden, "request": "no-such"}, carol.token).status_code == 400
    assert browser.http.get(base + "/oauth/consent?request=no-such").status_code == 400

    # Deny: back to the client with access_denied and its state; the request is then gone.
    denied = browser.answer(hidden, carol.token, decision="deny")
    assert denied.status_code == 303
    query = parse_qs(urlsplit(denied.headers["location"]).query)
    assert query["error"] == ["access_denied"] and query["state"] == ["st-123"] and "code" not in query
    assert browser.answer(hidden, carol.token).status_code == 400

    # Allow: a code, once.
    _, hidden = browser.open_consent(authorize_url(base, client_id, challenge))
    allowed = browser.answer(hidden, carol.token, ["conversation", "tasks"])
    assert allowed.status_code == 303
    query = parse_qs(urlsplit(allowed.headers["location"]).query)
    assert query["state"] == ["st-123"] and query["iss"] == [base + "/"]
    code = query["code"][0]
    assert browser.answer(hidden, carol.token).status_code == 400  # the request was answered

    exchange = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id}
    for changed, status, error in (
        ({"code_verifier": "w" * 50}, 400, "invalid_grant"),
        ({"code_verifier": verifier, "redirect_uri": "http://127.0.0.1:9/other"}, 400, "invalid_request"),
        ({"code_verifier": verifier, "client_id": "no-such-client"}, 401, "invalid_client"),
        ({"code_verifier": verifier, "code": "rcc_unknown"}, 400, "invalid_grant"),
        ({"code_verifier": verifier, "grant_type": "password"}, 400, "invalid_request"),
        ({"code_verifier": None}, 400, "invalid_request"),
    ):
        form = {k: v for k, v in (exchange | changed).items() if v is not None}
        refused = token_request(base, **form)
        assert refused.status_code == status and refused.json()["error"] == error, (changed, refused.text)
    issued = token_request(base, **exchange, code_verifier=verifier)
    assert issued.status_code == 200, issued.text
    assert issued.json()["scope"] == "conversation tasks" and issued.headers["cache-control"] == "no-store"
    again = token_request(base, **exchange, code_verifier=verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"  # single use
    access = issued.json()["access_token"]
    assert post(url, access, INITIALIZE).status_code == 200

    # Refresh with bad input; revocation ends the grant.
    refresh = issued.json()["refresh_token"]
    for form, error in (
        ({"refresh_token": "rcr_unknown", "client_id": client_id}, "invalid_grant"),
        ({"refresh_token": refresh, "client_id": client_id, "scope": "administration"}, "invalid_scope"),
    ):
        refused = token_request(base, grant_type="refresh_token", **form)
        assert refused.status_code == 400 and refused.json()["error"] == error, refused.text
    # (The SDK's revocation form requires a client_secret field, empty for a public client.)
    revocation = {"token": access, "client_id": client_id, "client_secret": ""}
    revoked = httpx2.post(base + "/revoke", data=revocation, timeout=60)
    assert revoked.status_code == 200, revoked.text
    assert post(url, access, INITIALIZE).status_code == 401
    gone = token_request(base, grant_type="refresh_token", refresh_token=refresh, client_id=client_id)
    assert gone.status_code == 400 and gone.json()["error"] == "invalid_grant"


def test_the_gateway_narrows_a_call_to_the_purposes_it_names(stack, workspace):
    dana = stack.member(workspace, purposes=[m.PURPOSE_CONVERSATION, m.PURPOSE_TASKS])
    dana.remember("Dana's larkspur errand list.", purpose=m.PURPOSE_TASKS)
    narrowed = (*dana.md(), ("recallatron-purposes", "conversation"))
    request = g.RecallRequest(query="larkspur", purpose=m.PURPOSE_TASKS)
    assert [i.memory.body for i in stack.memory.Recall(request, metadata=dana.md()).items] == [
        "Dana's larkspur errand list."
    ]
    with pytest.raises(grpc.RpcError) as denied:
        stack.memory.Recall(request, metadata=narrowed)
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
    dana.remember("Dana's larkspur chat note.")
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=narrowed)  # every granted purpose
    assert [mem.body for mem in listed.memories] == ["Dana's larkspur chat note."]
    for value, code in (
        ("reporting", grpc.StatusCode.PERMISSION_DENIED),  # never widened past the token's grant
        ("conversation,root", grpc.StatusCode.INVALID_ARGUMENT),
        ("", grpc.StatusCode.INVALID_ARGUMENT),
        (" , ", grpc.StatusCode.INVALID_ARGUMENT),
        ("x" * 5000, grpc.StatusCode.INVALID_ARGUMENT),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            metadata = (*dana.md(), ("recallatron-purposes", value))
            stack.memory.FindEntities(g.FindEntitiesRequest(name="x"), metadata=metadata)
        assert refused.value.code() == code, (value[:20], refused.value.details())


def test_public_url_is_checked_and_names_the_issuer_on_a_public_bind(stack, capsys):
    for value in (
        "ftp://mcp.example.test",
        "http://mcp.example.test",  # plain http only for a loopback host
        "https://mcp.example.test/mcp",
        "https://mcp.example.test:*",
        "mcp.example.test",
        "",
    ):
        with pytest.raises(SystemExit) as stopped:
            cli_main(["mcp", "--gateway", "127.0.0.1:1", "--http", "127.0.0.1:1", "--public-url", value])
        assert stopped.value.code == 2 and "argument --public-url: expected" in capsys.readouterr().err, value
    with pytest.raises(SystemExit) as stopped:
        cli_main(["mcp", "--gateway", "127.0.0.1:1", "--token", "x", "--public-url", "https://mcp.example.test"])
    assert "are for --http" in stopped.value.code
    with serve_http(stack, "0.0.0.0", "--public-url", "https://MCP.example.test") as (url, port):
        named = {"Host": "mcp.example.test"}
        missing = httpx2.post(url, json=INITIALIZE, headers=named, timeout=60)
        metadata_url = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
        assert missing.status_code == 401, missing.text
        assert missing.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
        resource = httpx2.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp").json()
        assert resource["resource"] == "https://mcp.example.test/mcp"
        issuer = httpx2.get(f"http://127.0.0.1:{port}/.well-known/oauth-authorization-server").json()
        assert issuer["token_endpoint"] == "https://mcp.example.test/token"


def test_codes_access_tokens_and_consent_pages_expire(stack, workspace):
    """In process, so the clock need not be waited on: each expiry is set in the past."""
    erin = stack.member(workspace)
    base = "http://127.0.0.1:8765"
    gateway = client.Gateway(gateway_addr(stack), None)
    provider = oauth.Provider(gateway, base, base + "/mcp")
    app = Starlette(routes=oauth.routes(provider))

    async def main():
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url=base, timeout=60) as http:
            client_id = (
                await http.post("/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})
            ).json()["client_id"]
            verifier, challenge = pkce()

            async def consent(purposes=("conversation",)):
                page = await http.get((await http.get(authorize_url(base, client_id, challenge))).headers["location"])
                hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page.text))
                return hidden, await http.post(
                    "/oauth/consent",
                    data={**hidden, "member_token": erin.token, "purpose": list(purposes), "decision": "allow"},
                    headers={"Origin": base},
                )

            # A consent page left open too long: its request is gone.
            page = await http.get((await http.get(authorize_url(base, client_id, challenge))).headers["location"])
            hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page.text))
            for pending in provider.pending.values():
                pending.expires_at = 0
            late = await http.post(
                "/oauth/consent",
                data={**hidden, "member_token": erin.token, "purpose": "conversation", "decision": "allow"},
                headers={"Origin": base},
            )
            assert late.status_code == 400 and "expired" in late.text

            # A code past its 60 s.
            _, answered = await consent()
            code = parse_qs(urlsplit(answered.headers["location"]).query)["code"][0]
            assert all(0 < c.expires_at - time.time() <= 60 for c in provider.codes.values())
            for stored in provider.codes.values():
                stored.expires_at = 0
            form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id}
            expired = await http.post("/token", data={**form, "code_verifier": verifier})
            assert expired.status_code == 400 and expired.json()["error"] == "invalid_grant"

            # An access token past its hour is refused; its refresh still works.
            _, answered = await consent()
            code = parse_qs(urlsplit(answered.headers["location"]).query)["code"][0]
            issued = (await http.post("/token", data={**form, "code": code, "code_verifier": verifier})).json()
            assert await provider.load_access_token(issued["access_token"]) is not None
            for stored in provider.access.values():
                stored.expires_at = 1
            assert await provider.load_access_token(issued["access_token"]) is None
            refreshed = await http.post(
                "/token",
                data={"grant_type": "refresh_token", "refresh_token": issued["refresh_token"], "client_id": client_id},
            )
            assert refreshed.status_code == 200, refreshed.text
            assert await provider.load_access_token(refreshed.json()["access_token"]) is not None

            # A gateway that cannot answer does not spend the refresh token: it works once it is back.
            live, dead = provider.gateway, client.Gateway(f"127.0.0.1:{free_port()}", None)
            again = {"grant_type": "refresh_token", "refresh_token": refreshed.json()["refresh_token"]}
            provider.gateway = dead
            try:
                unavailable = await http.post("/token", data={**again, "client_id": client_id})
            finally:
                provider.gateway = live
                dead.close()
            assert unavailable.status_code == 400 and unavailable.json()["error"] == "invalid_request"
            assert "try again" in unavailable.json()["error_description"]
            assert (await http.post("/token", data={**again, "client_id": client_id})).status_code == 200

    try:
        anyio.run(main)
    finally:
        gateway.close()
