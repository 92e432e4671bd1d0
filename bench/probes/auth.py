"""Authorization of the API port (issue 23, auth): sign-in redirects stay on the site, a CR/LF
`next` is no 500, `Authorization: BEARER` works, a tossed CSRF cookie is refused, guessing
tokens on /login is throttled, and when the server requires a token for reads, no page, /live
or /metrics answers without one. Each probe is meaningful against any server: those that need
the token or closed reads say so and hold when the server has neither."""

import http.client
import re
import urllib.parse

from probes.common import Failed, host_port

EVIL_NEXTS = [
    "/\t/evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "//evil.example",
    "https://evil.example",
    "/\n/evil.example",
]
CRLF_NEXTS = ["/\r\nSet-Cookie: dyeline_token=x", "/\r/evil.example", "\r\n"]


def _conn(target, source=None, timeout=10):
    host, port = host_port(target.api)
    return http.client.HTTPConnection(host, port, timeout=timeout,
                                      source_address=(source, 0) if source else None)


def _request(target, method, path, body=None, headers=None, source=None):
    """(status, headers (lower-case names, Set-Cookie as a list), body) without following
    redirects."""
    c = _conn(target, source)
    try:
        c.request(method, path, body=body, headers=dict(headers or {}))
        r = c.getresponse()
        data = r.read()
        h = {}
        for k, v in r.getheaders():
            k = k.lower()
            if k == "set-cookie":
                h.setdefault(k, []).append(v)
            else:
                h[k] = v
        return r.status, h, data
    finally:
        c.close()


def _cookie(headers, name):
    for v in headers.get("set-cookie", []):
        if v.startswith(name + "="):
            return v.split(";", 1)[0].split("=", 1)[1]
    return None


def _login_form(target, source=None):
    """(csrf nonce cookie, form token) of the sign-in page."""
    status, h, body = _request(target, "GET", "/login", source=source)
    if status != 200:
        raise Failed(f"GET /login answered {status}")
    nonce = _cookie(h, "dyeline_csrf")
    m = re.search(rb'name="csrf" value="([0-9a-f]+)"', body)
    if not nonce or not m:
        raise Failed("the sign-in page has no CSRF cookie or field")
    return nonce, m.group(1).decode()


def _post_login(target, form, token, nxt, source=None):
    body = urllib.parse.urlencode({"csrf": form[1], "token": token, "next": nxt})
    return _request(target, "POST", "/login", body=body, source=source, headers={
        "Cookie": f"dyeline_csrf={form[0]}",
        "Content-Type": "application/x-www-form-urlencoded"})


def _next_field(body):
    m = re.search(rb'name="next" value="([^"]*)"', body)
    return m.group(1).decode() if m else None


def redirect_stays_local(target):
    for nxt in EVIL_NEXTS:
        status, _, body = _request(target, "GET", "/login?next=" + urllib.parse.quote(nxt, safe=""))
        if status != 200 or _next_field(body) != "/":
            raise Failed(f"GET /login?next={nxt!r}: {status}, next field {_next_field(body)!r}")
    if not target.token:
        return f"{len(EVIL_NEXTS)} hostile next values rendered as / (no token: sign-in not tried)"
    form = _login_form(target)
    for nxt in EVIL_NEXTS:
        status, h, _ = _post_login(target, form, target.token, nxt)
        if status != 303 or h.get("location") != "/":
            raise Failed(f"sign-in with next={nxt!r}: {status} to {h.get('location')!r}")
    return f"{len(EVIL_NEXTS)} hostile next values: sign-in redirects to / ({target.still_up()})"


def crlf_next_is_no_500(target):
    seen = []
    for nxt in CRLF_NEXTS:
        status, h, _ = _request(target, "GET", "/login?next=" + urllib.parse.quote(nxt, safe=""))
        seen.append(status)
        if status >= 500:
            raise Failed(f"GET /login?next={nxt!r} answered {status}")
        if target.token:
            form = _login_form(target)
            status, h, _ = _post_login(target, form, target.token, nxt)
            seen.append(status)
            if status >= 500 or "\n" in h.get("location", "") or h.get("location") not in (None, "/"):
                raise Failed(f"sign-in with next={nxt!r}: {status} to {h.get('location')!r}")
    return f"statuses {sorted(set(seen))} ({target.still_up()})"


def bearer_scheme_in_capitals(target):
    if not target.token:
        return "no token given: nothing to check"
    for scheme in ("BEARER ", "bearer ", "Bearer  "):
        status, _, body = _request(target, "GET", "/api/v1/channels",
                                   headers={"Authorization": scheme + target.token})
        if status != 200:
            raise Failed(f"{scheme.strip()!r}: {status} {body[:200]!r}")
    return "BEARER, bearer and two spaces accepted"


def tossed_csrf_cookie_is_refused(target):
    if not target.token:
        return "no token given: nothing to check"
    form = _login_form(target)
    status, h, _ = _post_login(target, form, target.token, "/")
    signed = _cookie(h, "dyeline_token")
    if status != 303 or not signed:
        raise Failed(f"sign-in with the token: {status}")
    theirs = _login_form(target)  # an attacker's own pair
    for cookies in (f"dyeline_csrf={theirs[0]}; dyeline_csrf={form[0]}; dyeline_token={signed}",
                    f"dyeline_csrf={theirs[0]}; dyeline_token={signed}"):
        status, _, body = _request(target, "POST", "/logout", body=f"csrf={theirs[1]}", headers={
            "Cookie": cookies, "Content-Type": "application/x-www-form-urlencoded"})
        if status != 403:
            raise Failed(f"logout with a tossed csrf cookie ({cookies[:40]}…): {status}")
    return "a tossed nonce with the attacker's own form token: 403 (duplicate and alone)"


def login_guessing_is_throttled(target):
    # From 127.0.0.3 when the server is on loopback, so the throttle of this client does not
    # hold the other probes' requests (from 127.0.0.1) for the rest of its window.
    host, _ = host_port(target.api)
    source = "127.0.0.3" if host.startswith("127.") else None
    form = _login_form(target, source)
    seen = {}
    retry_after = None
    for i in range(200):
        status, h, _ = _post_login(target, form, f"guess-{i:020d}", "/", source=source)
        seen[status] = seen.get(status, 0) + 1
        if status == 429 and retry_after is None:
            retry_after = h.get("retry-after")
        if status >= 500:
            raise Failed(f"guess {i}: {status}")
    if not seen.get(429):
        raise Failed(f"200 wrong sign-ins, no 429: {seen}")
    if not retry_after:
        raise Failed("429 without Retry-After")
    return f"200 wrong sign-ins: {seen}, Retry-After {retry_after} s ({target.still_up()})"


def closed_reads_close_everything(target):
    status, _, _ = _request(target, "GET", "/api/v1/channels")
    if status == 200:
        return "reads are open on this server (api.read_requires_token = false): nothing to check"
    if status != 401:
        raise Failed(f"GET /api/v1/channels without a token: {status}")
    leaks = []
    for path in ("/", "/traces", "/channels/global", "/channels/global/confirm?action=start",
                 "/traces/0af7651916cd43dd8448eb211c80319c", "/live", "/metrics",
                 "/api/v1/alerts", "/api/v1/timeline", "/api/v1/findings"):
        status, h, body = _request(target, "GET", path)
        if status == 200 or (status == 303 and not h.get("location", "").startswith("/login")):
            leaks.append(f"{path}: {status}")
    if leaks:
        raise Failed("answered without a token: " + ", ".join(leaks))
    status, _, _ = _request(target, "GET", "/healthz")
    if status != 200:
        raise Failed(f"/healthz: {status}")
    return "reads require a token: 10 pages/streams/metrics refused without one, /healthz open"


PROBES = [
    ("sign-in redirect stays local", redirect_stays_local),
    ("CR/LF in next is no 500", crlf_next_is_no_500),
    ("Authorization: BEARER in capitals", bearer_scheme_in_capitals),
    ("tossed CSRF cookie refused", tossed_csrf_cookie_is_refused),
    ("closed reads close pages, /live, /metrics", closed_reads_close_everything),
    ("200 wrong sign-ins are throttled", login_guessing_is_throttled),
]
