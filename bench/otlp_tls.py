#!/usr/bin/env python3
"""OTLP/gRPC ingest with TLS and bearer tokens on against off (issue 28, item 5: target >= 0.85x).

Each run starts a fresh `dyeline serve` (WAL and Parquet on, as shipped) and sends the same
load with `loadgen` (1,000-span requests, --requests of them, 4 in flight): "off" over plain
HTTP/2 with no token, "on" over TLS 1.3 (a self-signed CA made here with openssl, an ECDSA
P-256 server certificate for localhost) with `authorization: Bearer` on every request and
`[otlp] tokens` set on the server. Runs alternate off, on, off, on, ... so drift on the machine
falls on both; the report gives each side's median spans/s and the ratio on/off.

Usage: python3 bench/otlp_tls.py [--requests 500] [--reps 5] [--profile bench-fast]
Build first: cargo build --profile bench-fast --bin dyeline --bin loadgen
Writes bench/results/otlp-tls-<date>.json.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ingest import ROOT, Dyeline, sh  # noqa: E402

TOKEN = "bench-otlp-token-0123456789abcdef"


def make_certs(d):
    """A CA and a localhost server certificate signed by it (ECDSA P-256), in `d`."""
    ca_key, ca, key, csr, cert = (os.path.join(d, n) for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=dyeline bench CA")
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    sh("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
       "-out", cert, "-days", "2", "-extfile", ext)
    return ca, cert, key


def run(bins, secure, certs, requests, seed):
    env = {}
    if secure:
        ca, cert, key = certs
        env = {"DYELINE_OTLP__TLS__CERT": cert, "DYELINE_OTLP__TLS__KEY": key, "DYELINE_OTLP_TOKEN": TOKEN}
    d = Dyeline(os.path.join(bins, "dyeline"), env)
    try:
        cmd = [os.path.join(bins, "loadgen"), "--requests", str(requests), "--seed", str(seed)]
        if secure:
            cmd += ["--endpoint", d.endpoint.replace("http://", "https://"), "--ca", certs[0], "--token", TOKEN]
        else:
            cmd += ["--endpoint", d.endpoint]
        out = json.loads(subprocess.run(cmd, check=True, text=True, capture_output=True).stdout)
        stored = d.sql("SELECT count(*) FROM spans")[0][0]
        assert stored == out["spans"], f"stored {stored} of {out['spans']} sent"
        return out["spans_per_second"]
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--profile", default="bench-fast")
    a = ap.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    bins = os.path.join(target, a.profile)
    with tempfile.TemporaryDirectory(prefix="dyeline-tls-bench-") as d:
        certs = make_certs(d)
        off, on = [], []
        for rep in range(a.reps):
            off.append(run(bins, False, certs, a.requests, 10 + 2 * rep))
            on.append(run(bins, True, certs, a.requests, 11 + 2 * rep))
            print(f"rep {rep + 1}: off {off[-1]:,.0f} spans/s, on {on[-1]:,.0f} spans/s", file=sys.stderr)
    m_off, m_on = statistics.median(off), statistics.median(on)
    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], text=True, capture_output=True).stdout.strip()
    result = {
        "benchmark": "OTLP/gRPC ingest, TLS + bearer token on vs off",
        "requests": a.requests, "spans_per_request": 1000, "concurrency": 4, "reps": a.reps,
        "profile": a.profile, "git": git,
        "off_spans_per_second": off, "on_spans_per_second": on,
        "median_off": m_off, "median_on": m_on, "ratio_on_off": m_on / m_off, "target": 0.85,
    }
    day = datetime.date.today().isoformat()
    path = os.path.join(ROOT, "bench", "results", f"otlp-tls-{day}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"median off {m_off:,.0f} spans/s, on {m_on:,.0f} spans/s: {m_on / m_off:.3f}x (target >= 0.85); {path}")


if __name__ == "__main__":
    main()
