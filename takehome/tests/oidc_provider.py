"""A small, real OpenID Connect provider for the single sign-on tests, built on Authlib's authorization server.

It runs in a thread on a local port and speaks the protocol for real: a discovery document, a sign-in page
(username and password) behind the authorization endpoint, the authorization code grant with PKCE, ID tokens
signed RS256 by a key it publishes at its JWKS endpoint, a userinfo endpoint and an end-session endpoint.
A test adds the people it needs (`add_person`) with the claims the provider vouches for, and can make it
misbehave as a broken or hostile provider would: sign with a key it does not publish (`rogue_signing`), or
name another issuer in its tokens (`token_issuer`).
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from urllib.parse import parse_qsl, urlencode, urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from authlib.oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, OAuth2Request, grants
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core import UserInfo
from authlib.oidc.core.grants import OpenIDCode
from joserfc.jwk import KeySet, RSAKey


@dataclass
class Person:
    username: str
    password: str
    claims: dict  # sub, email, email_verified, groups...


@dataclass
class Client(ClientMixin):
    client_id: str
    client_secret: str
    redirect_uris: list[str] = field(default_factory=list)

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return self.redirect_uris[0] if self.redirect_uris else None

    def get_allowed_scope(self, scope):
        return " ".join(s for s in (scope or "").split() if s in ("openid", "email", "profile"))

    def check_redirect_uri(self, redirect_uri):
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret):
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method, endpoint):
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type == "authorization_code"


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    person: Person
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: int = field(default_factory=lambda: int(time.time()))

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope

    def get_nonce(self):
        return self.nonce

    def get_auth_time(self):
        return self.auth_time

    def get_acr(self):
        return None

    def get_amr(self):
        return None


class _Request(OAuth2Request):
    def __init__(self, method: str, uri: str, headers: dict, query: dict, form: dict):
        super().__init__(method, uri, headers=headers)
        self._query, self._form = query, form
        self.payload = BasicOAuth2Payload({**query, **form})

    @property
    def args(self):
        return self._query

    @property
    def form(self):
        return self._form


class _Headers(dict):
    """Request headers, looked up whatever their case (Authlib asks for `Authorization`)."""

    def get(self, key, default=None):
        return super().get(key.lower(), default)

    def __getitem__(self, key):
        return super().__getitem__(key.lower())

    def __contains__(self, key):
        return super().__contains__(key.lower())


class Provider:
    """The provider; `start()` serves it on 127.0.0.1:`port`, `stop()` ends it."""

    def __init__(self, port: int, client_id: str = "takehome", client_secret: str | None = None):
        self.issuer = f"http://127.0.0.1:{port}"
        self.port = port
        self.client = Client(client_id, client_secret or secrets.token_urlsafe(24))
        self.people: dict[str, Person] = {}
        self.codes: dict[str, Code] = {}
        self.tokens: dict[str, tuple[Person, str]] = {}
        self.key = RSAKey.generate_key(2048, parameters={"kid": "signing-1", "use": "sig", "alg": "RS256"})
        # Same kid, never published: what a forger signs with.
        self.rogue_key = RSAKey.generate_key(2048, parameters={"kid": "signing-1", "use": "sig", "alg": "RS256"})
        self.rogue_signing = False
        self.token_issuer: str | None = None  # None: its own issuer
        self.ended_sessions: list[dict] = []  # the end-session requests it answered
        self.server = self._authorization_server()
        self._httpd: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    # --- what a test sets up -------------------------------------------------------------------------

    def add_person(self, username: str, email: str, *, email_verified: bool | None = True, groups=(),
                   sub: str | None = None, **claims) -> Person:
        """Someone who can sign in here (password `pw-<username>`), with the claims the provider vouches for."""
        base = {"sub": sub or f"sub-{username}", "email": email, "name": username.title(), "groups": list(groups)}
        if email_verified is not None:
            base["email_verified"] = email_verified
        person = Person(username, f"pw-{username}", {**base, **claims})
        self.people[username] = person
        return person

    def allow_redirect(self, uri: str) -> None:
        self.client.redirect_uris.append(uri)

    def settings(self) -> dict:
        """The settings a site uses to sign on through this provider (discovery finds the endpoints)."""
        return {"OIDC_ENABLED": True, "OIDC_ISSUER": self.issuer, "OIDC_CLIENT_ID": self.client.client_id,
                "OIDC_CLIENT_SECRET": self.client.client_secret, "OIDC_RP_CLIENT_ID": self.client.client_id,
                "OIDC_RP_CLIENT_SECRET": self.client.client_secret, "OIDC_ENDPOINTS": {}}

    # --- Authlib's server ----------------------------------------------------------------------------

    def _authorization_server(self) -> AuthorizationServer:
        provider = self

        class Server(AuthorizationServer):
            def query_client(self, client_id):
                return provider.client if client_id == provider.client.client_id else None

            def save_token(self, token, request):
                provider.tokens[token["access_token"]] = (request.user, token.get("scope", ""))

            def create_oauth2_request(self, request):
                return request

            def create_json_request(self, request):
                return request

            def handle_response(self, status, body, headers):
                return status, body, headers

            def send_signal(self, name, *args, **kwargs):
                pass

        class CodeGrant(grants.AuthorizationCodeGrant):
            TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

            def save_authorization_code(self, code, request):
                data = request.payload.data
                provider.codes[code] = Code(code, request.client.get_client_id(), data.get("redirect_uri", ""),
                                            request.scope, request.user, data.get("nonce"),
                                            data.get("code_challenge"), data.get("code_challenge_method"))

            def query_authorization_code(self, code, client):
                found = provider.codes.get(code)
                return found if found and found.client_id == client.get_client_id() else None

            def delete_authorization_code(self, authorization_code):
                provider.codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code):
                return authorization_code.person

        class IdToken(OpenIDCode):
            def exists_nonce(self, nonce, request):
                return any(code.nonce == nonce for code in provider.codes.values())

            def resolve_client_private_key(self, client):
                return provider.rogue_key if provider.rogue_signing else provider.key

            def get_client_algorithm(self, client):
                return "RS256"

            def get_encode_header(self, client):
                return {"alg": "RS256", "kid": "signing-1"}

            def get_client_claims(self, client):
                return {"iss": provider.token_issuer or provider.issuer, "aud": [client.get_client_id()]}

            def generate_user_info(self, user, scope):
                return UserInfo(user.claims)

        server = Server(scopes_supported=["openid", "email", "profile"])
        server.register_token_generator("default", BearerTokenGenerator(
            access_token_generator=lambda *args, **kwargs: secrets.token_urlsafe(32)))
        server.register_grant(CodeGrant, [IdToken(require_nonce=True), CodeChallenge(required=True)])
        return server

    # --- HTTP ----------------------------------------------------------------------------------------

    def __call__(self, environ, start_response):
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "")
        query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
        form = {}
        if method == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            form = dict(parse_qsl(environ["wsgi.input"].read(length).decode()))
        headers = _Headers({key[5:].replace("_", "-").lower(): value for key, value in environ.items()
                            if key.startswith("HTTP_")})
        uri = f"{self.issuer}{path}" + (f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else "")
        request = _Request(method, uri, headers, query, form)
        routes = {"/.well-known/openid-configuration": self._discovery, "/jwks": self._jwks,
                  "/authorize": self._authorize, "/token": self._token, "/userinfo": self._userinfo,
                  "/logout": self._logout}
        handler = routes.get(path)
        status, body, out_headers = handler(request) if handler else (404, "not found", [])
        if isinstance(body, dict):
            body = json.dumps(body)
            out_headers = [*out_headers, ("Content-Type", "application/json")]
        elif not any(name.lower() == "content-type" for name, _ in out_headers):
            out_headers = [*out_headers, ("Content-Type", "text/html; charset=utf-8")]
        start_response(f"{status} {'OK' if status < 300 else 'Found' if status < 400 else 'Error'}",
                       list(out_headers))
        return [body.encode() if isinstance(body, str) else body]

    def _discovery(self, request):
        return 200, {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
            "jwks_uri": f"{self.issuer}/jwks",
            "end_session_endpoint": f"{self.issuer}/logout",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
        }, []

    def _jwks(self, request):
        return 200, KeySet([self.key]).as_dict(private=False), []

    def _authorize(self, request):
        try:
            grant = self.server.get_consent_grant(request)
        except Exception as exc:  # an OAuth2Error: a bad client or redirect URI is shown, never redirected to
            return 400, f"<h1>Refused</h1><p>{html.escape(str(exc))}</p>", []
        if request.method == "GET":
            return 200, self._sign_in_page(request.args, ""), []
        person = self.people.get(request.form.get("username", ""))
        if person is None or not secrets.compare_digest(request.form.get("password", ""), person.password):
            return 200, self._sign_in_page(request.form, "Wrong username or password."), []
        return self.server.create_authorization_response(request, grant_user=person, grant=grant)

    def _sign_in_page(self, params: dict, error: str) -> str:
        hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                         for k, v in params.items() if k not in ("username", "password"))
        return (f"<!doctype html><title>Test provider: sign in</title><h1>Test provider: sign in</h1>"
                f"<p class=error>{html.escape(error)}</p>"
                f'<form method="post" action="/authorize?{html.escape(urlencode(params))}">{hidden}'
                '<label>Username <input name="username" id="username"></label>'
                '<label>Password <input name="password" id="password" type="password"></label>'
                '<button type="submit">Sign in</button></form>')

    def _token(self, request):
        return self.server.create_token_response(request)

    def _userinfo(self, request):
        auth = request.headers.get("authorization", "")
        found = self.tokens.get(auth.removeprefix("Bearer ").strip()) if auth.startswith("Bearer ") else None
        if found is None:
            return 401, {"error": "invalid_token"}, [("WWW-Authenticate", 'Bearer error="invalid_token"')]
        return 200, found[0].claims, []

    def _logout(self, request):
        self.ended_sessions.append(dict(request.args))
        back = request.args.get("post_logout_redirect_uri", "")
        # why: a provider sends the browser back only to an address registered for the client.
        allowed = {urlsplit(uri)._replace(path="", query="").geturl() for uri in self.client.redirect_uris}
        if back and urlsplit(back)._replace(path="", query="").geturl() in allowed:
            return 302, "", [("Location", back)]
        return 200, "<h1>Signed out</h1>", []

    # --- serving -------------------------------------------------------------------------------------

    def start(self) -> Provider:
        class Quiet(WSGIRequestHandler):
            def log_message(self, *args):
                pass

        class Threading(ThreadingMixIn, WSGIServer):
            daemon_threads = True

        self._httpd = make_server("127.0.0.1", self.port, self, server_class=Threading, handler_class=Quiet)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="oidc-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
