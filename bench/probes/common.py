"""What every hardening probe shares: the target server's addresses, its /healthz check and its
resident memory. A probe module under bench/probes/ defines PROBES, a list of (name, function);
each function takes a Target, runs one bounded attack, and returns a short detail string when
the server held, or raises Failed (or any exception) when it did not. bench/hardening_probe.py
runs them all and prints one line per probe."""

import os
import socket
import time
import urllib.error
import urllib.request


class Failed(Exception):
    """The server did not hold: the message says how."""


class Target:
    def __init__(self, api, otlp_http, otlp_grpc, token=None, pid=None):
        self.api = api  # "127.0.0.1:8080"
        self.otlp_http = otlp_http
        self.otlp_grpc = otlp_grpc
        self.token = token
        self.pid = pid

    def url(self, path):
        return f"http://{self.api}{path}"

    def request(self, method, url, body=None, headers=None, timeout=30, token=True):
        """(status, headers, body bytes); HTTP errors are returned, not raised."""
        headers = dict(headers or {})
        if token and self.token:
            headers.setdefault("Authorization", f"Bearer {self.token}")
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def healthz_seconds(self):
        """Seconds /healthz took on a fresh connection; raises Failed unless 200 within 1 s."""
        t = time.monotonic()
        try:
            with urllib.request.urlopen(self.url("/healthz"), timeout=1) as r:
                if r.status != 200:
                    raise Failed(f"/healthz answered {r.status}")
        except (OSError, urllib.error.URLError) as e:
            raise Failed(f"/healthz did not answer within 1 s: {e}") from e
        return time.monotonic() - t

    def rss_mb(self):
        """Resident memory in MB from /proc (None when the server's pid is not known here)."""
        if not self.pid:
            return None
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return None

    def still_up(self, max_rss_mb=None):
        """Raises Failed unless /healthz answers within 1 s (and RSS is under max_rss_mb)."""
        s = self.healthz_seconds()
        rss = self.rss_mb()
        if max_rss_mb is not None and rss is not None and rss > max_rss_mb:
            raise Failed(f"resident memory {rss:.0f} MB over the bound of {max_rss_mb} MB")
        return f"healthz {s * 1000:.0f} ms" + (f", rss {rss:.0f} MB" if rss is not None else "")


def host_port(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def connect(addr, timeout=5):
    return socket.create_connection(host_port(addr), timeout=timeout)


def free_fds_hint():
    return os.sysconf("SC_OPEN_MAX")
