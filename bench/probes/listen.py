"""Listener limits (issue 23, defects 7 and 8), against a server with its default settings: an
HTTP/2 stream flood on one gRPC connection, ~1,500 idle sockets on each listener, a request
head sent one byte a second, and 100 stalled uploads on OTLP/HTTP. Python stdlib only: raw
sockets, a hand-written HTTP/2 preface and HEADERS frames (HPACK literals, no Huffman)."""

import resource
import socket
import struct
import threading
import time

from .common import Failed, connect, host_port

EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def metric(target, name, **labels):
    """The value of the series name{labels} in /metrics (0 when absent)."""
    _, _, body = target.request("GET", target.url("/metrics"), timeout=5)
    want = [f'{k}="{v}"' for k, v in labels.items()]
    for line in body.decode().splitlines():
        if line.startswith(name + "{") and all(w in line for w in want):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


class Health:
    """Polls /healthz every 100 ms on a thread while an attack runs."""

    def __init__(self, target):
        self.target, self.failures, self.slowest, self.probes = target, [], 0.0, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            self.probes += 1
            try:
                self.slowest = max(self.slowest, self.target.healthz_seconds())
            except Failed as e:
                self.failures.append(str(e))
            time.sleep(0.1)

    def finish(self, what):
        self.stop.set()
        self.thread.join()
        if self.failures:
            raise Failed(f"{what}: /healthz failed {len(self.failures)} of {self.probes}: {self.failures[:3]}")
        return f"healthz slowest {self.slowest * 1000:.0f} ms of {self.probes}"


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def export_head(authority):
    block = bytearray([0x83, 0x86])  # :method POST, :scheme http
    for index, value in ((0x04, EXPORT_PATH), (0x01, authority)):
        block += bytes([index, len(value)]) + value.encode()
    for name, value in (("content-type", "application/grpc"), ("te", "trailers")):
        block += bytes([0, len(name)]) + name.encode() + bytes([len(value)]) + value.encode()
    return bytes(block)


def read_frame(s):
    head = recv_exact(s, 9)
    length = int.from_bytes(head[:3], "big")
    return head[3], head[4], recv_exact(s, length)


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def grpc_stream_flood(target):
    """20,000 header-only Export streams on one connection: the server must advertise a
    stream limit, refuse the streams past it, and keep its memory."""
    before = target.rss_mb()
    health = Health(target)
    s = connect(target.otlp_grpc, timeout=10)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))
    advertised = None
    while True:
        kind, flags, payload = read_frame(s)
        if kind == 4 and not flags & 1:
            for i in range(0, len(payload), 6):
                ident, value = struct.unpack(">HI", payload[i:i + 6])
                if ident == 3:
                    advertised = value
            break
    s.sendall(frame(4, 1, 0))
    if advertised is None:
        raise Failed("no SETTINGS_MAX_CONCURRENT_STREAMS advertised")
    seen = {"refused": 0, "goaway": None}

    def reader():
        try:
            while True:
                kind, _, payload = read_frame(s)
                if kind == 3 and payload == b"\0\0\0\7":
                    seen["refused"] += 1
                elif kind == 7:
                    seen["goaway"] = int.from_bytes(payload[4:8], "big")
        except OSError:
            pass

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    block = export_head(target.otlp_grpc)
    try:
        s.sendall(b"".join(frame(1, 4, 2 * i + 1, block) for i in range(20_000)))
    except OSError:
        pass
    t.join(timeout=10)
    s.close()
    held = health.finish("stream flood")
    after = target.rss_mb()
    if seen["refused"] == 0:
        raise Failed(f"no stream refused past the advertised {advertised}")
    if before is not None and after - before > 100:
        raise Failed(f"RSS grew {after - before:.0f} MB")
    grew = f", RSS +{after - before:.0f} MB" if before is not None else ""
    return (f"advertised {advertised} streams, {seen['refused']} refused, GOAWAY code {seen['goaway']}"
            f"{grew}, {held}")


def idle_socket_flood(target):
    """About 1,500 idle sockets on each listener; the API answers throughout and an OTLP/HTTP
    export succeeds; past a listener's connection bound the longest-idle sockets are closed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    per = min(1500, (min(hard, 1 << 20) - 200) // 3)
    health = Health(target)
    socks = {}
    try:
        for name, addr in (("otlp_grpc", target.otlp_grpc), ("otlp_http", target.otlp_http), ("api", target.api)):
            socks[name] = [socket.create_connection(host_port(addr), timeout=5) for _ in range(per)]
        time.sleep(1.5)
        status, _, body = target.request(
            "POST", f"http://{target.otlp_http}/v1/traces", body=b"{}",
            headers={"Content-Type": "application/json"}, timeout=5, token=False)
        if status != 200:
            raise Failed(f"OTLP/HTTP export during the flood answered {status}: {body[:200]!r}")
        closed = {}
        for name, ss in socks.items():
            n = 0
            for s in ss:
                s.setblocking(False)
                try:
                    while s.recv(4096):
                        pass
                    n += 1  # EOF
                except BlockingIOError:
                    pass
                except OSError:
                    n += 1
            closed[name] = n
        evicted = {n: metric(target, "dyeline_listener_connections_closed_total", listener=n, reason="evicted")
                   for n in socks}
    finally:
        for ss in socks.values():
            for s in ss:
                s.close()
    held = health.finish("idle-socket flood")
    return f"{per} sockets per listener; closed by the server {closed}; evicted {evicted}; {held}"


def slow_head(target):
    """A request head sent one byte a second: cut by the header read timeout (default 10 s)."""
    s = connect(target.otlp_http, timeout=5)
    s.settimeout(1)
    t = time.monotonic()
    head = b"POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    answer = None
    for byte in head[:25]:
        try:
            s.sendall(bytes([byte]))
            answer = s.recv(4096)  # waits up to a second: the byte's pace
            break  # an answer (408) or EOF: the server cut it
        except socket.timeout:
            continue
        except OSError as e:
            answer = str(e).encode()
            break
    took = time.monotonic() - t
    s.close()
    if answer is None:
        raise Failed(f"a request head sent one byte a second was still read after {took:.0f} s")
    first = answer.split(b"\r\n", 1)[0].decode(errors="replace") or "EOF"
    return f"cut after {took:.1f} s ({first})"


def stalled_uploads(target):
    """100 uploads declaring 15 MiB, each stalled after 4 MiB (400 MiB offered): the listener
    holds at most its max_buffered_request_bytes (256 MiB by default), refuses the rest with
    503 naming the setting, and cuts the stalled ones after request_read_timeout (30 s)."""
    before = target.rss_mb()
    health = Health(target)
    answers = []
    lock = threading.Lock()

    def upload():
        try:
            s = connect(target.otlp_http, timeout=45)
            s.sendall(b"POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: %d\r\n\r\n" % (15 << 20))
            s.sendall(b" " * (4 << 20))
            out = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
            answer = out.decode(errors="replace")
        except OSError as e:
            answer = f"error: {e}"
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=upload, daemon=True) for _ in range(100)]
    for t in threads:
        t.start()
    time.sleep(3)
    held_bytes = metric(target, "dyeline_listener_buffered_request_bytes", listener="otlp_http")
    peak = target.rss_mb()
    t0 = time.monotonic()
    for t in threads:
        t.join(timeout=max(0.1, 45 - (time.monotonic() - t0)))
    took = time.monotonic() - t0 + 3
    held = health.finish("stalled uploads")
    if any(t.is_alive() for t in threads):
        raise Failed(f"{sum(t.is_alive() for t in threads)} stalled uploads still open after {took:.0f} s")
    by_bytes = metric(target, "dyeline_listener_requests_refused_total", listener="otlp_http",
                      reason="max_buffered_request_bytes")
    by_time = metric(target, "dyeline_listener_requests_refused_total", listener="otlp_http",
                     reason="request_read_timeout")
    left = metric(target, "dyeline_listener_buffered_request_bytes", listener="otlp_http")
    if held_bytes > 256 << 20:
        raise Failed(f"{held_bytes / 2**20:.0f} MiB of request bodies held")
    if left:
        raise Failed(f"{left} bytes still held after the uploads were cut")
    named = sum("max_buffered_request_bytes" in a or "request_read_timeout" in a for a in answers)
    grew = f", RSS +{peak - before:.0f} MB at the peak" if before is not None else ""
    return (f"held {held_bytes / 2**20:.0f} MiB at most; refused {by_bytes:.0f} at the byte bound and "
            f"{by_time:.0f} at the read timeout ({named} answers name the setting); all cut within "
            f"{took:.0f} s{grew}; {held}")


PROBES = [
    ("gRPC HTTP/2 stream flood", grpc_stream_flood),
    ("idle sockets on every listener", idle_socket_flood),
    ("request head one byte a second", slow_head),
    ("100 stalled 15 MiB uploads", stalled_uploads),
]
