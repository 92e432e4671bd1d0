#!/usr/bin/env python3
"""Offline checks of deploy/ (issue 27, item 5): no image is built or pulled, no container or
cluster is started. Three uses:

  deploy.py check        every check below; one line per check, exit 1 when any fails
  deploy.py configs      the dyeline configurations deploy/ runs with, as JSON: each file with
                         the environment its container gets (for server/src/config/deploy_tests.rs,
                         which loads them with the binary's own loader)
  deploy.py healthcheck  the Dockerfile's HEALTHCHECK command, as a JSON list (tests/e2e/deploy.rs
                         runs it against a real `dyeline serve`)
  deploy.py mutants      breaks each file in a copy of the repository in a known way (MUTATIONS)
                         and checks that the check responsible fails on it

What `check` looks at:
- deploy/docker/Dockerfile, parsed with dockerfile-parse: a multi-stage build whose builder
  runs `cargo build --release --locked --bin dyeline`, a Debian slim runtime installing only
  CA certificates, a non-root USER, `dyeline serve --config /etc/dyeline/dyeline.toml`, the
  exposed ports and volume matching the image's configuration, a HEALTHCHECK on /healthz;
  .dockerignore keeping target/ out and every workspace member in.
- deploy/compose/compose.yaml against the compose-spec JSON schema (the copy check-jsonschema
  ships, vendored from github.com/compose-spec/compose-spec, Apache-2.0), then its wiring:
  three nodes with their own node id and volume, loopback-only ports, the mounted files exist,
  credentials agree between compose.yaml, dyeline.toml and seaweedfs-s3.json.
- the OpenTelemetry Collector configurations (compose and Kubernetes) against the documented
  keys of the loadbalancing exporter (and of the OTLP exporter it templates), pipelines
  referring to defined components, traces routed by trace id to exactly the Dyeline nodes.
- deploy/compose/alertmanager.yml with `amtool check-config` (Debian's prometheus-alertmanager,
  which .ci/run installs).
- deploy/grafana/provisioning: the data sources (Jaeger → Dyeline's /jaeger, Prometheus with
  exemplars to it), the dashboard provider and a dashboard whose queries name only metrics the
  server registers.
- every Kubernetes manifest under deploy/k8s against the Kubernetes JSON schemas bundled by
  kubernetes-validate (strict: unknown fields are errors), then the references between them
  (ConfigMaps, Secrets, claims, Services' selectors and ports, probes on /livez and /readyz at the
  configuration's API port, stable node ids, non-root security contexts); each folder's
  kustomization.yaml lists exactly its manifests. Not in `check` (kubectl is no Debian package,
  so CI has none): `deploy.py kustomize` renders each folder with `kubectl kustomize` and
  validates the result, on a machine that has kubectl.
"""

import copy
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import yaml

ROOT = DEPLOY = DOCKERFILE = IMAGE_CONFIG = COMPOSE_DIR = K8S_DIR = None


def set_root(root):
    """Points every check at the repository `root` (the mutation run uses a copy)."""
    global ROOT, DEPLOY, DOCKERFILE, IMAGE_CONFIG, COMPOSE_DIR, K8S_DIR
    ROOT = Path(root).resolve()
    DEPLOY = ROOT / "deploy"
    DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
    IMAGE_CONFIG = DEPLOY / "docker" / "dyeline.toml"
    COMPOSE_DIR = DEPLOY / "compose"
    K8S_DIR = DEPLOY / "k8s"


set_root(Path(__file__).resolve().parents[2])

# The environment `docker compose` would interpolate compose.yaml with in the checks (the
# token must be set: compose.yaml refuses to start without it).
COMPOSE_TEST_ENV = {"DYELINE_API_TOKEN": "compose-test-token-0123456789abcdef"}

# The serve command every deployment runs.
SERVE = ["serve", "--config", "/etc/dyeline/dyeline.toml"]
CONFIG_PATH = "/etc/dyeline/dyeline.toml"

# ---------------------------------------------------------------------------------------------
# The loadbalancing exporter's documented configuration keys:
# https://github.com/open-telemetry/opentelemetry-collector-contrib/blob/main/exporter/loadbalancingexporter/README.md
# (and its config.go beside it, whose mapstructure tags are the keys the README documents:
# the exporter-level timeout, retry_on_failure and sending_queue, routing_key, routing_attributes,
# spa_per_endpoint, protocol.otlp, and one of four resolvers).
LB_KEYS = {
    "protocol",
    "resolver",
    "routing_key",
    "routing_attributes",
    "timeout",
    "retry_on_failure",
    "sending_queue",
    "spa_per_endpoint",
}
LB_ROUTING_KEYS = {"service", "traceID", "metric", "resource", "streamID", "attributes"}
LB_PROTOCOL_KEYS = {"otlp"}
LB_RESOLVER_KEYS = {
    "static": {"hostnames"},
    "dns": {"hostname", "port", "interval", "timeout"},
    "k8s": {"service", "ports", "timeout", "return_hostnames"},
    "aws_cloud_map": {
        "namespace",
        "service_name",
        "health_status",
        "interval",
        "timeout",
        "port",
        "owner_account",
    },
}
# "Don't use traceID in metric pipeline" (same README): metrics carry no trace id.
LB_METRICS_ROUTING = {"service", "resource", "metric", "streamID", "attributes"}
# protocol.otlp is the OTLP/gRPC exporter's configuration, less `endpoint` (the exporter sets
# it to each backend): https://github.com/open-telemetry/opentelemetry-collector/blob/main/exporter/otlpexporter/README.md
# (config.go: timeout, sending_queue, retry_on_failure, and configgrpc.ClientConfig squashed in).
OTLP_KEYS = {
    "timeout",
    "sending_queue",
    "retry_on_failure",
    "compression",
    "tls",
    "keepalive",
    "read_buffer_size",
    "write_buffer_size",
    "wait_for_ready",
    "headers",
    "user_agent",
    "balancer_name",
    "authority",
    "auth",
    "middlewares",
}
# configretry.BackOffConfig
RETRY_KEYS = {
    "enabled",
    "initial_interval",
    "randomization_factor",
    "multiplier",
    "max_interval",
    "max_elapsed_time",
}
# exporterhelper.QueueBatchConfig
QUEUE_KEYS = {
    "enabled",
    "wait_for_result",
    "block_on_overflow",
    "sizer",
    "queue_size",
    "num_consumers",
    "storage",
    "batch",
}
# configtls.ClientConfig
TLS_KEYS = {
    "insecure",
    "insecure_skip_verify",
    "server_name_override",
    "ca_file",
    "ca_pem",
    "cert_file",
    "cert_pem",
    "key_file",
    "key_pem",
    "include_system_ca_certs_pool",
    "min_version",
    "max_version",
    "cipher_suites",
    "curve_preferences",
    "reload_interval",
}
COLLECTOR_TOP_KEYS = {"receivers", "processors", "exporters", "extensions", "connectors", "service"}
LB_TYPES = {"loadbalancing", "load_balancing"}

# Kubernetes versions the manifests are validated against: the newest kubernetes-validate
# bundles, and an older one still in wide use.
K8S_OLDEST = "1.30"

# kustomize's Kustomization fields used or plausible here
# (https://kubectl.docs.kubernetes.io/references/kustomize/kustomization/).
KUSTOMIZATION_KEYS = {
    "apiVersion",
    "kind",
    "metadata",
    "namespace",
    "namePrefix",
    "nameSuffix",
    "labels",
    "commonLabels",
    "commonAnnotations",
    "resources",
    "components",
    "images",
    "replicas",
    "patches",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
}


class CheckFailed(Exception):
    pass


def need(cond, message):
    if not cond:
        raise CheckFailed(message)


# --------------------------------------------------------------------------------- helpers ----


def load_yaml_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def listen_port(addr):
    """The port of a `host:port` listen address."""
    return int(str(addr).rsplit(":", 1)[1])


def listen_host(addr):
    return str(addr).rsplit(":", 1)[0]


_INTERP = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])((?:[^}])*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def interpolate(value, env):
    """Compose's variable interpolation of one string: $$, $VAR, ${VAR}, ${VAR:-default},
    ${VAR-default}, ${VAR:?error}, ${VAR?error}."""

    def sub(m):
        if m.group(1):
            return "$"
        name = m.group(2) or m.group(5)
        op, arg = m.group(3), m.group(4)
        val = env.get(name)
        if op in (":-", "-"):
            if val is None or (op == ":-" and val == ""):
                return arg
            return val
        if op in (":?", "?"):
            if val is None or (op == ":?" and val == ""):
                raise CheckFailed(f"compose interpolation: {name} is required: {arg}")
            return val
        return "" if val is None else val

    return _INTERP.sub(sub, value)


def interpolate_tree(node, env):
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [interpolate_tree(v, env) for v in node]
    if isinstance(node, dict):
        return {k: interpolate_tree(v, env) for k, v in node.items()}
    return node


def compose_raw():
    return load_yaml_docs(COMPOSE_DIR / "compose.yaml")[0]


def compose(env=None):
    return interpolate_tree(compose_raw(), COMPOSE_TEST_ENV if env is None else env)


def env_dict(environment):
    """A compose service's `environment` (mapping or list) as a dict of strings."""
    if environment is None:
        return {}
    if isinstance(environment, list):
        out = {}
        for item in environment:
            k, _, v = item.partition("=")
            out[k] = v
        return out
    return {k: ("" if v is None else str(v).lower() if isinstance(v, bool) else str(v)) for k, v in environment.items()}


def short_volume(spec):
    """A compose short-syntax volume `source:target[:mode]` as (source, target, mode)."""
    if isinstance(spec, dict):
        return spec.get("source"), spec["target"], "ro" if spec.get("read_only") else "rw"
    parts = spec.split(":")
    if len(parts) == 2:
        return parts[0], parts[1], "rw"
    return parts[0], parts[1], parts[2]


def dyeline_services(c):
    return {n: s for n, s in c["services"].items() if str(s.get("image", "")).startswith("dyeline:")}


def k8s_docs(folder):
    """(file, doc) of every manifest directly in `folder` (kustomization.yaml apart)."""
    out = []
    for f in sorted(folder.glob("*.yaml")):
        if f.name == "kustomization.yaml":
            continue
        for d in load_yaml_docs(f):
            out.append((f, d))
    return out


def by_kind(docs, kind):
    return [d for _, d in docs if d.get("kind") == kind]


def one(items, what):
    need(len(items) == 1, f"expected one {what}, found {len(items)}")
    return items[0]


def configmap_toml(docs, name):
    cm = [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"] == name]
    need(cm, f"ConfigMap {name} is referenced but not defined")
    data = cm[0].get("data", {})
    need("dyeline.toml" in data, f"ConfigMap {name} has no key dyeline.toml")
    return data["dyeline.toml"]


def pod_spec(workload):
    return workload["spec"]["template"]["spec"]


def container(workload, name=None):
    cs = pod_spec(workload)["containers"]
    if name is None:
        return cs[0]
    return one([c for c in cs if c["name"] == name], f"container {name}")


def named_port(c, port):
    """The number of a container port given by name or number."""
    if isinstance(port, int):
        return port
    for p in c.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    raise CheckFailed(f"container {c['name']} has no port named {port}")


# ------------------------------------------------------------------------------ Dockerfile ----


def dockerfile():
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(path=str(DOCKERFILE))
    stages = []
    for ins in parser.structure:
        if ins["instruction"] == "FROM":
            stages.append({"from": ins["value"], "ins": []})
        elif stages:
            stages[-1]["ins"].append(ins)
    return parser, stages


def exec_form(value, what):
    try:
        v = json.loads(value)
    except json.JSONDecodeError as e:
        raise CheckFailed(f"{what} is not in exec (JSON) form: {value!r} ({e})")
    need(isinstance(v, list) and all(isinstance(x, str) for x in v), f"{what}: not a list of strings")
    return v


def healthcheck_command():
    _, stages = dockerfile()
    hc = [i for i in stages[-1]["ins"] if i["instruction"] == "HEALTHCHECK"]
    need(len(hc) == 1, "the runtime stage has no HEALTHCHECK")
    value = hc[0]["value"]
    m = re.search(r"(?:^|\s)CMD\s+(\[.*\])\s*$", value, re.S)
    need(m, f"HEALTHCHECK without an exec-form CMD: {value!r}")
    return exec_form(m.group(1), "HEALTHCHECK CMD")


def check_dockerfile():
    parser, stages = dockerfile()
    args = {}
    for ins in parser.structure:
        if ins["instruction"] == "ARG" and "=" in ins["value"]:
            k, v = ins["value"].split("=", 1)
            args[k.strip()] = v.strip()

    def expand(s):
        return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: args.get(m.group(1), m.group(0)), s)

    need(len(stages) >= 2, f"not a multi-stage build: {len(stages)} FROM")
    builder = next((s for s in stages if " AS " in s["from"].upper()), None)
    need(builder is not None, "no named builder stage (FROM … AS builder)")
    builder_name = builder["from"].split()[-1]
    need(expand(builder["from"]).split()[0].startswith("rust:"), f"builder is not a Rust image: {builder['from']}")
    runs = " ".join(i["value"] for i in builder["ins"] if i["instruction"] == "RUN")
    need(
        "cargo build --release --locked --bin dyeline" in " ".join(runs.split()),
        "the builder does not run `cargo build --release --locked --bin dyeline`",
    )
    # The builder's toolchain is at least the workspace's rust-version.
    ws = tomllib.loads((ROOT / "Cargo.toml").read_text())
    msrv = tuple(int(x) for x in ws["workspace"]["package"]["rust-version"].split("."))
    rust_tag = expand(builder["from"]).split()[0].split(":", 1)[1]
    tag_version = tuple(int(x) for x in re.match(r"(\d+(?:\.\d+)*)", rust_tag).group(1).split("."))
    need(tag_version[:2] >= msrv[:2], f"builder {rust_tag} is older than rust-version {msrv}")
    # .cargo/config.toml links with mold on x86_64: the builder must have it.
    if "mold" in (ROOT / ".cargo" / "config.toml").read_text():
        need(re.search(r"apt-get install[^&]*\bmold\b", runs), "the builder does not install mold (.cargo/config.toml uses it)")

    runtime = stages[-1]
    base = expand(runtime["from"]).split()[0]
    need(re.fullmatch(r"debian:[a-z]+-slim", base), f"runtime is not Debian slim: {base}")
    # The builder and runtime share a Debian release (glibc of the binary).
    need(
        base.split(":")[1].split("-")[0] in expand(builder["from"]),
        f"builder {expand(builder['from'])} and runtime {base} differ in Debian release",
    )
    rt_runs = [i["value"] for i in runtime["ins"] if i["instruction"] == "RUN"]
    installed = set()
    for r in rt_runs:
        for m in re.finditer(r"apt-get install((?:\s+-[-\w]+)*)((?:\s+[a-z0-9][a-z0-9.+-]*)+)", r):
            installed |= set(m.group(2).split())
    need(installed <= {"ca-certificates"}, f"the runtime installs more than the binary needs: {sorted(installed)}")
    need(not any(re.search(r"\bcargo\b|\brustc\b", r) for r in rt_runs), "the runtime stage runs cargo/rustc")
    copies = [i["value"] for i in runtime["ins"] if i["instruction"] == "COPY"]
    need(
        any(c.startswith(f"--from={builder_name} ") and c.split()[-1] == "/usr/local/bin/dyeline" for c in copies),
        "the runtime does not copy the binary from the builder to /usr/local/bin/dyeline",
    )
    # Every COPY source outside the builder exists in the build context.
    for c in copies:
        if c.startswith("--from="):
            continue
        src = c.split()[0]
        need((ROOT / src).exists(), f"COPY source {src} does not exist")
    need(
        any(c.split()[-1] == CONFIG_PATH and c.split()[0] == str(IMAGE_CONFIG.relative_to(ROOT)) for c in copies),
        f"the runtime does not copy {IMAGE_CONFIG.relative_to(ROOT)} to {CONFIG_PATH}",
    )

    users = [i["value"].strip() for i in runtime["ins"] if i["instruction"] == "USER"]
    need(users, "no USER in the runtime stage: it would run as root")
    user = users[-1].split(":")[0]
    need(user not in ("root", "0"), f"USER {users[-1]} is root")
    # No RUN after the last USER needs root, and the last word is the non-root user.
    last_user_line = max(i["startline"] for i in runtime["ins"] if i["instruction"] == "USER")
    need(
        not any(i["instruction"] == "RUN" and i["startline"] > last_user_line for i in runtime["ins"]),
        "a RUN after USER",
    )

    entry = [i for i in runtime["ins"] if i["instruction"] == "ENTRYPOINT"]
    cmd = [i for i in runtime["ins"] if i["instruction"] == "CMD"]
    need(entry and cmd, "the runtime needs ENTRYPOINT and CMD")
    argv = exec_form(entry[-1]["value"], "ENTRYPOINT") + exec_form(cmd[-1]["value"], "CMD")
    need(
        Path(argv[0]).name == "dyeline" and argv[1:] == SERVE,
        f"the image runs {argv}, not `dyeline {' '.join(SERVE)}`",
    )

    # Ports and volume agree with the image's own configuration.
    cfg = tomllib.loads(IMAGE_CONFIG.read_text())
    exposed = set()
    for i in runtime["ins"]:
        if i["instruction"] == "EXPOSE":
            exposed |= {int(p.split("/")[0]) for p in i["value"].split()}
    want = {listen_port(cfg[k]) for k in ("otlp_grpc_addr", "otlp_http_addr", "api_addr")}
    need(exposed == want, f"EXPOSE {sorted(exposed)} but the image's config listens on {sorted(want)}")
    for k in ("otlp_grpc_addr", "otlp_http_addr", "api_addr"):
        need(listen_host(cfg[k]) in ("0.0.0.0", "[::]"), f"image config {k} = {cfg[k]}: unreachable from outside the container")
    vols = []
    for i in runtime["ins"]:
        if i["instruction"] == "VOLUME":
            v = i["value"].strip()
            vols += json.loads(v) if v.startswith("[") else v.split()
    need(vols, "no VOLUME for the data directory")
    data_dir = cfg["data_dir"]
    need(any(data_dir == v or data_dir.startswith(v.rstrip("/") + "/") for v in vols), f"data_dir {data_dir} is not on a VOLUME {vols}")
    need(cfg.get("api", {}).get("read_requires_token") is True, "image config: the API listens beyond loopback with reads open")

    hc = healthcheck_command()
    text = " ".join(hc)
    need("/healthz" in text, "HEALTHCHECK does not ask /healthz")
    need(str(listen_port(cfg["api_addr"])) in text, "HEALTHCHECK does not ask the configured API port")
    return "Dockerfile: multi-stage, non-root, serve command, ports, volume, healthcheck"


def check_dockerignore():
    path = ROOT / ".dockerignore"
    need(path.exists(), ".dockerignore is missing at the repository root")
    patterns = [l.strip() for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]
    need("target" in patterns or "/target" in patterns, ".dockerignore does not exclude target/")

    def ignored(rel):
        out = False
        for p in patterns:
            neg = p.startswith("!")
            pat = p[1:] if neg else p
            pat = pat.lstrip("/")
            hit = fnmatch.fnmatch(rel, pat) or any(
                fnmatch.fnmatch("/".join(rel.split("/")[: i + 1]), pat) for i in range(len(rel.split("/")))
            )
            if hit:
                out = not neg
        return out

    ws = tomllib.loads((ROOT / "Cargo.toml").read_text())
    needed = ["Cargo.toml", "Cargo.lock", ".cargo/config.toml", str(IMAGE_CONFIG.relative_to(ROOT))]
    for m in ws["workspace"]["members"]:
        needed += [f"{m}/Cargo.toml", f"{m}/src"]
    # Files the build compiles in (include_str!/include_bytes! outside tests) must be there too.
    for m in ws["workspace"]["members"]:
        for rs in (ROOT / m / "src").rglob("*.rs"):
            for inc in re.findall(r'include_(?:str|bytes)!\("([^"]+)"\)', rs.read_text()):
                target = (rs.parent / inc).resolve()
                if ROOT in target.parents:
                    needed.append(str(target.relative_to(ROOT)))
    for rel in needed:
        need(not ignored(rel), f".dockerignore leaves {rel} out of the build context")
    return ".dockerignore: target/ out, workspace members in"


# --------------------------------------------------------------------------------- compose ----


def compose_schema():
    import check_jsonschema

    path = Path(check_jsonschema.__file__).parent / "builtin_schemas" / "vendor" / "compose-spec.json"
    need(path.exists(), f"check-jsonschema does not ship the compose-spec schema at {path}")
    return json.loads(path.read_text())


def check_compose_schema():
    import jsonschema

    schema = compose_schema()
    cls = jsonschema.validators.validator_for(schema)
    errors = sorted(cls(schema).iter_errors(compose()), key=lambda e: list(e.path))
    need(not errors, "compose.yaml against the compose-spec schema: " + "; ".join(
        f"{'.'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors[:5]))
    # The token guard: without DYELINE_API_TOKEN compose refuses to start.
    try:
        compose(env={})
    except CheckFailed:
        pass
    else:
        raise CheckFailed("compose.yaml starts without DYELINE_API_TOKEN (use ${DYELINE_API_TOKEN:?…})")
    return "compose.yaml: valid against the compose-spec schema; refuses to start without DYELINE_API_TOKEN"


def check_compose_wiring():
    c = compose()
    services = c["services"]
    nodes = dyeline_services(c)
    need(sorted(nodes) == ["dyeline-1", "dyeline-2", "dyeline-3"], f"the dyeline nodes are {sorted(nodes)}, not dyeline-1..3")
    images = {s["image"] for s in nodes.values()}
    need(len(images) == 1, f"the nodes run different images: {images}")
    node_ids, data_volumes = {}, {}
    cfg_path = COMPOSE_DIR / "dyeline.toml"
    cfg = tomllib.loads(cfg_path.read_text())
    data_dir = cfg["data_dir"]
    for name, s in nodes.items():
        env = env_dict(s.get("environment"))
        node_ids[name] = env.get("DYELINE_CLUSTER__NODE_ID")
        need(node_ids[name] == name, f"{name}: DYELINE_CLUSTER__NODE_ID is {node_ids[name]!r}, not its own name")
        vols = [short_volume(v) for v in s.get("volumes", [])]
        conf = [v for v in vols if v[1] == CONFIG_PATH]
        need(len(conf) == 1 and (COMPOSE_DIR / conf[0][0]).resolve() == cfg_path.resolve() and conf[0][2] == "ro",
             f"{name} does not mount deploy/compose/dyeline.toml read-only at {CONFIG_PATH}")
        data = [v for v in vols if data_dir == v[1] or data_dir.startswith(v[1].rstrip("/") + "/")]
        need(len(data) == 1, f"{name}: no volume holds data_dir {data_dir}")
        need(data[0][0] in c.get("volumes", {}), f"{name}: data volume {data[0][0]} is not a named volume")
        data_volumes[name] = data[0][0]
        for k in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DYELINE_API_TOKEN"):
            need(env.get(k), f"{name}: {k} is not set")
    need(len(set(data_volumes.values())) == 3, f"the nodes share data volumes: {data_volumes}")
    need(len(set(node_ids.values())) == 3, f"the nodes share node ids: {node_ids}")
    envs = [env_dict(s["environment"]) for s in nodes.values()]
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DYELINE_API_TOKEN"):
        need(len({e[k] for e in envs}) == 1, f"the nodes differ in {k}")

    # Only loopback is published.
    for name, s in services.items():
        for p in s.get("ports", []):
            if isinstance(p, dict):
                need(p.get("host_ip") == "127.0.0.1", f"{name}: port {p} is not bound to 127.0.0.1")
            else:
                need(str(p).startswith("127.0.0.1:") and str(p).count(":") == 2, f"{name}: port {p} is not bound to 127.0.0.1")
        for v in s.get("volumes", []):
            src, _, _ = short_volume(v)
            if src and (src.startswith(".") or src.startswith("/")):
                need((COMPOSE_DIR / src).exists(), f"{name}: mounted file {src} does not exist")
            elif src:
                need(src in c.get("volumes", {}), f"{name}: volume {src} is not declared")
        deps = s.get("depends_on", [])
        for d in deps if isinstance(deps, list) else deps.keys():
            need(d in services, f"{name} depends on {d}, which is not a service")

    # The collector gateway.
    collectors = [n for n, s in services.items() if str(s.get("image", "")).startswith("otel/opentelemetry-collector-contrib:")]
    col = services[one(collectors, "otel/opentelemetry-collector-contrib service")]
    mounts = [short_volume(v) for v in col.get("volumes", [])]
    need(any((COMPOSE_DIR / m[0]).resolve() == (COMPOSE_DIR / "otel-collector.yaml").resolve() for m in mounts if m[0]),
         "the collector does not mount otel-collector.yaml")
    col_cfg_target = next(m[1] for m in mounts if m[0] and (COMPOSE_DIR / m[0]).resolve() == (COMPOSE_DIR / "otel-collector.yaml").resolve())
    cmd = col.get("command", [])
    need(any(a in (f"--config={col_cfg_target}", col_cfg_target) for a in cmd) or not cmd,
         f"the collector's command {cmd} does not read {col_cfg_target}")

    # PostgreSQL: the catalog URL's user, password and database are the server's.
    pgs = [s for s in services.values() if str(s.get("image", "")).startswith("postgres:")]
    pg = one(pgs, "postgres service")
    pg_name = next(n for n, s in services.items() if s is pg)
    pg_env = env_dict(pg.get("environment"))
    url = cfg.get("catalog", {}).get("postgres_url") or envs[0].get("DYELINE_CATALOG__POSTGRES_URL")
    need(url, "no catalog URL: shared storage is off")
    m = re.fullmatch(r"postgres(?:ql)?://([^:@/]+):([^@/]+)@([^:/]+):(\d+)/([^?]+)", url)
    need(m, f"catalog URL {url!r} is not postgres://user:password@host:port/db")
    need(m.group(1) == pg_env.get("POSTGRES_USER") and m.group(2) == pg_env.get("POSTGRES_PASSWORD")
         and m.group(5) == pg_env.get("POSTGRES_DB", pg_env.get("POSTGRES_USER")),
         "the catalog URL's user, password or database differ from the postgres service's")
    need(m.group(3) == pg_name and m.group(4) == "5432", f"the catalog URL's host {m.group(3)}:{m.group(4)} is not {pg_name}:5432")
    need("healthcheck" in pg, "postgres has no healthcheck (the nodes wait for it: they list the catalog at start)")
    for name, s in nodes.items():
        deps = s.get("depends_on", {})
        need(isinstance(deps, dict) and deps.get(pg_name, {}).get("condition") == "service_healthy",
             f"{name} does not wait for {pg_name} to be healthy")

    # SeaweedFS: the bucket it creates is the object store's, its keys the nodes' AWS keys.
    weeds = [n for n, s in services.items() if str(s.get("image", "")).startswith("chrislusf/seaweedfs:")]
    weed_name = one(weeds, "chrislusf/seaweedfs service")
    weed = services[weed_name]
    args = weed.get("command", [])
    args = args.split() if isinstance(args, str) else args
    need(args and (args[0] == "mini" or (args[0] == "server" and "-s3" in args)), f"seaweedfs runs {args[:2]}, not `mini` or `server -s3`")
    store_url = cfg.get("storage", {}).get("object_store_url", "")
    need(store_url.startswith("s3://"), f"object_store_url {store_url!r} is not s3://")
    bucket = store_url[len("s3://"):].split("/")[0]
    buckets = [a.split("=", 1)[1].split(",") for a in args if a.startswith("-bucket=")]
    need(buckets and bucket in buckets[0], f"seaweedfs does not create bucket {bucket} (-bucket=)")
    s3conf = [a.split("=", 1)[1] for a in args if a.startswith("-s3.config=")]
    need(s3conf, "seaweedfs has no -s3.config: it would accept any key")
    wmounts = {short_volume(v)[1]: short_volume(v)[0] for v in weed.get("volumes", [])}
    need(s3conf[0] in wmounts, f"seaweedfs -s3.config={s3conf[0]} is not mounted")
    identities = json.loads((COMPOSE_DIR / wmounts[s3conf[0]]).read_text())["identities"]
    creds = {(c["accessKey"], c["secretKey"]): set(i.get("actions", [])) for i in identities for c in i["credentials"]}
    key = (envs[0]["AWS_ACCESS_KEY_ID"], envs[0]["AWS_SECRET_ACCESS_KEY"])
    need(key in creds, "the nodes' AWS keys are not an identity of seaweedfs-s3.json")
    need({"Read", "Write", "List"} <= creds[key] or "Admin" in creds[key], f"the nodes' identity may not read, write and list: {creds[key]}")
    endpoint = envs[0]["AWS_ENDPOINT_URL"]
    need(endpoint == f"http://{weed_name}:8333", f"AWS_ENDPOINT_URL {endpoint} is not the seaweedfs S3 port")
    need(envs[0].get("AWS_ALLOW_HTTP") == "true", "AWS_ALLOW_HTTP is not true for a plain http:// endpoint")

    # Alertmanager: the nodes send to it.
    ams = [n for n, s in services.items() if str(s.get("image", "")).startswith("prom/alertmanager:")]
    am_name = one(ams, "prom/alertmanager service")
    am_url = cfg.get("alerts", {}).get("alertmanager_url", "")
    need(am_url == f"http://{am_name}:9093", f"[alerts] alertmanager_url {am_url!r} is not http://{am_name}:9093")
    return "compose.yaml: 3 nodes with own ids and volumes, loopback ports, consistent credentials"


def check_alertmanager_config():
    amtool = shutil.which("amtool")
    need(amtool, "amtool is not installed (apt-get install prometheus-alertmanager; .ci/run does)")
    out = subprocess.run([amtool, "check-config", str(COMPOSE_DIR / "alertmanager.yml")], capture_output=True, text=True)
    need(out.returncode == 0, f"amtool check-config: {out.stdout}{out.stderr}")
    return "alertmanager.yml: amtool check-config passes"


# ------------------------------------------------------------------------------- collector ----


def check_collector_config(cfg, where, expect_backends):
    """`expect_backends(resolver_name, resolver)`: raises unless the resolver names exactly the
    Dyeline nodes."""
    need(set(cfg) <= COLLECTOR_TOP_KEYS, f"{where}: unknown top-level keys {sorted(set(cfg) - COLLECTOR_TOP_KEYS)}")
    service = cfg.get("service", {})
    for ext in service.get("extensions", []):
        need(ext in (cfg.get("extensions") or {}), f"{where}: service uses undefined extension {ext}")
    pipelines = service.get("pipelines", {})
    need("traces" in {p.split("/")[0] for p in pipelines}, f"{where}: no traces pipeline")
    for pname, p in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            for comp in p.get(kind, []) or []:
                need(comp in (cfg.get(kind) or {}), f"{where}: pipeline {pname} uses undefined {kind[:-1]} {comp}")
        need(p.get("receivers") and p.get("exporters"), f"{where}: pipeline {pname} needs receivers and exporters")

    lbs = {n: e or {} for n, e in (cfg.get("exporters") or {}).items() if n.split("/")[0] in LB_TYPES}
    need(lbs, f"{where}: no loadbalancing exporter")
    for name, e in lbs.items():
        need(set(e) <= LB_KEYS, f"{where}: exporter {name}: undocumented keys {sorted(set(e) - LB_KEYS)}")
        rk = e.get("routing_key", "traceID")
        need(rk in LB_ROUTING_KEYS, f"{where}: exporter {name}: routing_key {rk!r} is not one of {sorted(LB_ROUTING_KEYS)}")
        proto = e.get("protocol") or {}
        need(set(proto) == LB_PROTOCOL_KEYS, f"{where}: exporter {name}: protocol must be exactly {{otlp}}, is {sorted(proto)}")
        otlp = proto["otlp"] or {}
        need("endpoint" not in otlp, f"{where}: exporter {name}: protocol.otlp.endpoint is set (the exporter sets it per backend)")
        need(set(otlp) <= OTLP_KEYS, f"{where}: exporter {name}: protocol.otlp: undocumented keys {sorted(set(otlp) - OTLP_KEYS)}")
        need(set(otlp.get("retry_on_failure") or {}) <= RETRY_KEYS, f"{where}: {name}: retry_on_failure keys")
        need(set(otlp.get("sending_queue") or {}) <= QUEUE_KEYS, f"{where}: {name}: sending_queue keys")
        need(set(otlp.get("tls") or {}) <= TLS_KEYS, f"{where}: {name}: tls keys")
        need((otlp.get("tls") or {}).get("insecure") is True,
             f"{where}: exporter {name}: Dyeline's OTLP/gRPC listener has no TLS: protocol.otlp.tls.insecure must be true")
        need((otlp.get("sending_queue") or {}).get("enabled", True) is not False
             and (otlp.get("retry_on_failure") or {}).get("enabled", True) is not False,
             f"{where}: exporter {name}: a node's refusals (429/UNAVAILABLE) must be queued and retried")
        res = e.get("resolver") or {}
        need(len(res) == 1, f"{where}: exporter {name}: exactly one resolver, found {sorted(res)}")
        (rname, r), = res.items()
        need(rname in LB_RESOLVER_KEYS, f"{where}: exporter {name}: unknown resolver {rname}")
        need(set(r or {}) <= LB_RESOLVER_KEYS[rname], f"{where}: exporter {name}: resolver.{rname}: undocumented keys {sorted(set(r) - LB_RESOLVER_KEYS[rname])}")
        expect_backends(rname, r or {})

    for pname, p in pipelines.items():
        signal = pname.split("/")[0]
        for ex in p["exporters"]:
            if ex not in lbs:
                continue
            rk = lbs[ex].get("routing_key", "traceID")
            if signal == "metrics":
                need(rk in LB_METRICS_ROUTING, f"{where}: metrics pipeline {pname} routes by {rk} (README: not traceID)")
        if signal == "traces":
            need(p["exporters"] and all(ex in lbs and lbs[ex].get("routing_key") == "traceID" for ex in p["exporters"]),
                 f"{where}: traces pipeline {pname} does not export only through a loadbalancing exporter with routing_key: traceID")
    return f"{where}: loadbalancing exporter with documented keys, traces by traceID to the Dyeline nodes"


def check_compose_collector():
    c = compose()
    cfg_toml = tomllib.loads((COMPOSE_DIR / "dyeline.toml").read_text())
    port = listen_port(cfg_toml["otlp_grpc_addr"])
    want = {f"{n}:{port}" for n in dyeline_services(c)}

    def expect(rname, r):
        need(rname == "static", f"compose collector: resolver {rname}, expected static")
        got = r.get("hostnames") or []
        need(len(got) == len(set(got)) and set(got) == want, f"compose collector: static hostnames {got}, expected {sorted(want)}")

    cfg = load_yaml_docs(COMPOSE_DIR / "otel-collector.yaml")[0]
    return check_collector_config(cfg, "deploy/compose/otel-collector.yaml", expect)


def check_k8s_collector():
    docs = k8s_docs(K8S_DIR)
    sts = one(by_kind(docs, "StatefulSet"), "StatefulSet")
    headless = [s for s in by_kind(docs, "Service") if s["spec"].get("clusterIP") == "None"]
    hl = one(headless, "headless Service")
    hl_name = hl["metadata"]["name"]
    otlp_port = one([p for p in hl["spec"]["ports"] if p.get("name") == "otlp-grpc"], "otlp-grpc port of the headless Service")
    toml = tomllib.loads(configmap_toml(docs, one([v for v in pod_spec(sts)["volumes"] if "configMap" in v], "config volume")["configMap"]["name"]))
    need(named_port(container(sts), otlp_port["targetPort"]) == listen_port(toml["otlp_grpc_addr"]),
         "the headless Service's otlp-grpc port does not reach the configured OTLP/gRPC listener")

    def expect(rname, r):
        if rname == "dns":
            host = r.get("hostname", "")
            need(host == hl_name or host.startswith(hl_name + "."), f"k8s collector: dns hostname {host!r} is not the headless Service {hl_name}")
            need(int(r.get("port", 4317)) == otlp_port["port"], f"k8s collector: dns port {r.get('port')} is not {otlp_port['port']}")
        elif rname == "k8s":
            svc = r.get("service", "")
            need(svc.split(".")[0] == hl_name, f"k8s collector: k8s service {svc!r} is not {hl_name}")
            need(r.get("ports", [4317]) == [otlp_port["port"]], "k8s collector: k8s ports")
        else:
            raise CheckFailed(f"k8s collector: resolver {rname}; use dns or k8s on the headless Service")

    dep = one([d for d in by_kind(docs, "Deployment") if "opentelemetry-collector" in container(d)["image"]], "collector Deployment")
    c = container(dep)
    vol = one([v for v in pod_spec(dep)["volumes"] if "configMap" in v], "collector config volume")
    cm = one([d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"] == vol["configMap"]["name"]], "collector ConfigMap")
    mount = one([m for m in c["volumeMounts"] if m["name"] == vol["name"]], "collector config mount")
    keys = [k for k in cm["data"] if f"--config={mount['mountPath'].rstrip('/')}/{k}" in c.get("args", [])]
    need(len(keys) == 1, f"the collector's args {c.get('args')} do not read a key of ConfigMap {cm['metadata']['name']}")
    cfg = yaml.safe_load(cm["data"][keys[0]])
    return check_collector_config(cfg, f"deploy/k8s ConfigMap {cm['metadata']['name']}", expect)


# ------------------------------------------------------------------------------ Kubernetes ----


def check_k8s_schemas():
    import kubernetes_validate

    versions = [kubernetes_validate.utils.latest_version(), K8S_OLDEST]
    files = [f for f in sorted(K8S_DIR.rglob("*.yaml")) if f.name != "kustomization.yaml"]
    need(files, "no manifests under deploy/k8s")
    n = 0
    for f in files:
        for d in load_yaml_docs(f):
            for v in versions:
                try:
                    kubernetes_validate.validate(d, v, strict=True)
                except kubernetes_validate.ValidationError as e:
                    path = ".".join(map(str, e.path))
                    raise CheckFailed(f"{f.relative_to(ROOT)}: {d.get('kind')}/{d.get('metadata', {}).get('name')} against Kubernetes {v}: {path}: {e.message}")
                except kubernetes_validate.utils.SchemaNotFoundError as e:
                    raise CheckFailed(f"{f.relative_to(ROOT)}: no schema for {d.get('kind')} {d.get('apiVersion')}: {e}")
            n += 1
    return f"deploy/k8s: {n} manifests valid (strict) against Kubernetes {' and '.join(versions)}"


def check_kustomizations():
    folders = [K8S_DIR, K8S_DIR / "single-node"]
    for folder in folders:
        kpath = folder / "kustomization.yaml"
        need(kpath.exists(), f"{folder.relative_to(ROOT)} has no kustomization.yaml")
        k = load_yaml_docs(kpath)[0]
        need(k.get("kind") == "Kustomization", f"{kpath.relative_to(ROOT)}: kind {k.get('kind')}")
        need(set(k) <= KUSTOMIZATION_KEYS, f"{kpath.relative_to(ROOT)}: unknown fields {sorted(set(k) - KUSTOMIZATION_KEYS)}")
        res = k.get("resources", [])
        need(len(res) == len(set(res)), f"{kpath.relative_to(ROOT)}: a resource is listed twice")
        files = {f.name for f in folder.glob("*.yaml") if f.name != "kustomization.yaml"}
        need(set(res) == files, f"{kpath.relative_to(ROOT)}: resources {sorted(res)} differ from the folder's manifests {sorted(files)}")
        images = {i["name"] for i in k.get("images", [])}
        used = {c["image"].split(":")[0] for _, d in k8s_docs(folder) if d.get("kind") in ("Deployment", "StatefulSet") for c in pod_spec(d)["containers"]}
        need(images <= used, f"{kpath.relative_to(ROOT)}: images {sorted(images - used)} match no container")
    return "deploy/k8s: each kustomization.yaml lists exactly its folder's manifests"


def check_kubectl_kustomize():
    import kubernetes_validate

    kubectl = shutil.which("kubectl")
    need(kubectl, "kubectl kustomize: no kubectl on the PATH")
    n = 0
    for folder in (K8S_DIR, K8S_DIR / "single-node"):
        out = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
        need(out.returncode == 0, f"kubectl kustomize {folder.relative_to(ROOT)}: {out.stderr.strip()}")
        docs = [d for d in yaml.safe_load_all(out.stdout) if d]
        listed = sum(len(load_yaml_docs(folder / r)) for r in load_yaml_docs(folder / "kustomization.yaml")[0]["resources"])
        need(len(docs) == listed, f"kubectl kustomize {folder.relative_to(ROOT)}: {len(docs)} objects, expected {listed}")
        for d in docs:
            kubernetes_validate.validate(d, kubernetes_validate.utils.latest_version(), strict=True)
            for c in pod_spec(d)["containers"] if d["kind"] in ("Deployment", "StatefulSet") else []:
                need(":" in c["image"], f"kustomize left image {c['image']} without a tag")
            n += 1
    return f"kubectl kustomize: {n} objects rendered and valid"


def check_probes_and_security(workload, where, api_port):
    spec = pod_spec(workload)
    sc = spec.get("securityContext", {})
    need(sc.get("runAsNonRoot") is True, f"{where}: securityContext.runAsNonRoot is not true")
    need(sc.get("runAsUser", 0) != 0, f"{where}: runs as uid 0")
    c = container(workload)
    csc = c.get("securityContext", {})
    need(csc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation is not false")
    need("ALL" in csc.get("capabilities", {}).get("drop", []), f"{where}: capabilities not dropped")
    res = c.get("resources", {})
    need(res.get("requests", {}).get("memory") and res.get("requests", {}).get("cpu") and res.get("limits", {}).get("memory"),
         f"{where}: resources need cpu/memory requests and a memory limit")
    # Liveness: the process answers; readiness: the store takes writes (a node that would
    # refuse spans leaves the Service and the gateway's ring).
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz"), ("startupProbe", "/livez")):
        p = c.get(probe)
        if probe == "startupProbe" and p is None:
            continue
        need(p and "httpGet" in p, f"{where}: no {probe} over HTTP")
        need(p["httpGet"]["path"] == path, f"{where}: {probe} asks {p['httpGet']['path']}, not {path}")
        need(named_port(c, p["httpGet"]["port"]) == api_port, f"{where}: {probe} is not on the API port {api_port}")
    need(c.get("args", c.get("command")) == SERVE or c.get("args") is None, f"{where}: runs {c.get('args')}, not {' '.join(SERVE)}")
    need(pod_spec(workload).get("terminationGracePeriodSeconds", 30) >= 30, f"{where}: too little time to flush on SIGTERM")


def check_mounts_and_refs(docs, workload, where, toml):
    """The config volume, the data volume and every Secret reference of `workload`."""
    c = container(workload)
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod_spec(workload).get("volumes", [])}
    need(mounts.get(str(Path(CONFIG_PATH).parent)) in vols, f"{where}: nothing mounted at {Path(CONFIG_PATH).parent}")
    cfg_vol = vols[mounts[str(Path(CONFIG_PATH).parent)]]
    need("configMap" in cfg_vol, f"{where}: {Path(CONFIG_PATH).parent} is not a ConfigMap")
    configmap_toml(docs, cfg_vol["configMap"]["name"])
    data_dir = toml["data_dir"]
    holders = [p for p in mounts if data_dir == p or data_dir.startswith(p.rstrip("/") + "/")]
    need(holders, f"{where}: no volume holds data_dir {data_dir}")
    data_mount = mounts[max(holders, key=len)]
    secrets = {s["metadata"]["name"]: s for s in by_kind(docs, "Secret")}
    for e in c.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref and not ref.get("optional"):
            need(ref["name"] in secrets, f"{where}: env {e['name']} refers to Secret {ref['name']}, not defined")
            s = secrets[ref["name"]]
            need(ref["key"] in s.get("stringData", {}) or ref["key"] in s.get("data", {}), f"{where}: Secret {ref['name']} has no key {ref['key']}")
    for ports_key, addr_key in (("otlp-grpc", "otlp_grpc_addr"), ("otlp-http", "otlp_http_addr"), ("api", "api_addr")):
        need(named_port(c, ports_key) == listen_port(toml[addr_key]), f"{where}: container port {ports_key} is not {addr_key}'s")
        need(listen_host(toml[addr_key]) in ("0.0.0.0", "[::]"), f"{where}: {addr_key} {toml[addr_key]} is unreachable from outside the pod")
    need(toml.get("api", {}).get("read_requires_token") is True, f"{where}: the API listens beyond loopback with reads open")
    return data_mount


def check_services(docs, where):
    pods = [(d["spec"]["template"]["metadata"]["labels"], container(d)) for d in by_kind(docs, "StatefulSet") + by_kind(docs, "Deployment")]
    for svc in by_kind(docs, "Service"):
        sel = svc["spec"].get("selector", {})
        targets = [c for labels, c in pods if sel and all(labels.get(k) == v for k, v in sel.items())]
        need(targets, f"{where}: Service {svc['metadata']['name']} selects no pod")
        for p in svc["spec"]["ports"]:
            for c in targets:
                named_port(c, p.get("targetPort", p["port"]))


def check_k8s_cluster():
    docs = k8s_docs(K8S_DIR)
    sts = one(by_kind(docs, "StatefulSet"), "StatefulSet")
    where = f"StatefulSet {sts['metadata']['name']}"
    need(sts["spec"]["replicas"] == 3, f"{where}: {sts['spec']['replicas']} replicas, not 3")
    c = container(sts)
    node_id = [e for e in c.get("env", []) if e["name"] == "DYELINE_CLUSTER__NODE_ID"]
    need(node_id and node_id[0].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name",
         f"{where}: DYELINE_CLUSTER__NODE_ID does not come from the pod's name (downward API)")
    cfg_vol = one([v for v in pod_spec(sts)["volumes"] if "configMap" in v], "config volume")
    toml = tomllib.loads(configmap_toml(docs, cfg_vol["configMap"]["name"]))
    data_mount = check_mounts_and_refs(docs, sts, where, toml)
    claims = [t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates", [])]
    need(data_mount in claims, f"{where}: the data directory's volume {data_mount} is not a volumeClaimTemplate {claims}")
    check_probes_and_security(sts, where, listen_port(toml["api_addr"]))
    env = {e["name"] for e in c.get("env", [])}
    need("DYELINE_CATALOG__POSTGRES_URL" in env or toml.get("catalog", {}).get("postgres_url"), f"{where}: no catalog URL")
    need(toml.get("storage", {}).get("object_store_url"), f"{where}: no object store URL")
    need("DYELINE_API_TOKEN" in env, f"{where}: no shared API token (each node would make its own)")
    # The headless Service is the StatefulSet's and selects its pods.
    headless = [s for s in by_kind(docs, "Service") if s["metadata"]["name"] == sts["spec"]["serviceName"]]
    hl = one(headless, f"Service {sts['spec']['serviceName']}")
    need(hl["spec"].get("clusterIP") == "None", f"Service {hl['metadata']['name']} is not headless")
    need(not hl["spec"].get("publishNotReadyAddresses"), "the headless Service publishes unready pods to the gateway")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    need(all(labels.get(k) == v for k, v in hl["spec"]["selector"].items()), "the headless Service does not select the StatefulSet's pods")
    need(all(labels.get(k) == v for k, v in sts["spec"]["selector"]["matchLabels"].items()), "the StatefulSet's selector does not match its pods")
    regular = [s for s in by_kind(docs, "Service") if s["spec"].get("clusterIP") != "None"
               and all(labels.get(k) == v for k, v in s["spec"].get("selector", {}).items())]
    api = [s for s in regular if any(named_port(c, p.get("targetPort", p["port"])) == listen_port(toml["api_addr"]) for p in s["spec"]["ports"])]
    need(api, "no regular Service for the nodes' API and dashboard")
    check_services(docs, "deploy/k8s")
    # The Secret example cannot start a node as it is: its token is refused (under 16 characters).
    secret = one(by_kind(docs, "Secret"), "Secret")
    token = secret.get("stringData", {}).get("DYELINE_API_TOKEN", "")
    need(len(token.strip()) < 16, "secret.example.yaml's API token is usable as it stands: keep a placeholder the server refuses")
    return "deploy/k8s: StatefulSet of 3 with node ids from pod names, PVCs, probes, non-root, Services, Secret refs"


def check_k8s_single():
    folder = K8S_DIR / "single-node"
    docs = k8s_docs(folder)
    dep = one(by_kind(docs, "Deployment"), "Deployment")
    where = f"single-node Deployment {dep['metadata']['name']}"
    need(dep["spec"]["replicas"] == 1, f"{where}: {dep['spec']['replicas']} replicas (the data directory holds a lock)")
    need(dep["spec"].get("strategy", {}).get("type") == "Recreate", f"{where}: strategy is not Recreate (a rolling update would start a second process on the locked data directory)")
    cfg_vol = one([v for v in pod_spec(dep)["volumes"] if "configMap" in v], "config volume")
    toml = tomllib.loads(configmap_toml(docs, cfg_vol["configMap"]["name"]))
    data_mount = check_mounts_and_refs(docs, dep, where, toml)
    vol = {v["name"]: v for v in pod_spec(dep)["volumes"]}[data_mount]
    need("persistentVolumeClaim" in vol, f"{where}: the data directory is not on a PersistentVolumeClaim")
    pvcs = {p["metadata"]["name"] for p in by_kind(docs, "PersistentVolumeClaim")}
    need(vol["persistentVolumeClaim"]["claimName"] in pvcs, f"{where}: claim {vol['persistentVolumeClaim']['claimName']} is not defined")
    check_probes_and_security(dep, where, listen_port(toml["api_addr"]))
    need(not toml.get("storage", {}).get("object_store_url") and not toml.get("catalog"), f"{where}: shared storage configured in the single-node default")
    env = {e["name"] for e in container(dep).get("env", [])}
    need(not any(e.startswith(("DYELINE_STORAGE__", "DYELINE_CATALOG__", "AWS_")) for e in env), f"{where}: shared-storage variables set")
    check_services(docs, "deploy/k8s/single-node")
    return "deploy/k8s/single-node: 1 replica, Recreate, PVC, probes, non-root, no shared storage"


# ------------------------------------------------------------------------------- configs ------


def k8s_env(docs, workload, pod_name, secret_override=None):
    """The environment of `workload`'s container in pod `pod_name`, with Secret values from the
    manifests (`secret_override` replaces some)."""
    secrets = {s["metadata"]["name"]: {**s.get("stringData", {})} for s in by_kind(docs, "Secret")}
    out = {}
    for e in container(workload).get("env", []):
        if "value" in e:
            out[e["name"]] = str(e["value"])
            continue
        vf = e.get("valueFrom", {})
        if "fieldRef" in vf:
            need(vf["fieldRef"]["fieldPath"] == "metadata.name", f"env {e['name']}: fieldRef {vf['fieldRef']['fieldPath']} not modelled")
            out[e["name"]] = pod_name
        elif "secretKeyRef" in vf:
            ref = vf["secretKeyRef"]
            if (secret_override or {}).get(e["name"]) is not None:
                out[e["name"]] = secret_override[e["name"]]
            elif ref["name"] in secrets and ref["key"] in secrets[ref["name"]]:
                out[e["name"]] = secrets[ref["name"]][ref["key"]]
            else:
                need(ref.get("optional"), f"env {e['name']}: Secret {ref['name']} key {ref['key']} missing")
        else:
            raise CheckFailed(f"env {e['name']}: valueFrom {sorted(vf)} not modelled")
    return out


def configs():
    """Every dyeline configuration deploy/ runs with: the file's text and the environment."""
    cases = []
    cases.append({
        "name": "docker image",
        "deployment": "docker",
        "toml": IMAGE_CONFIG.read_text(),
        "env": {},
        "shared_storage": False,
    })
    c = compose()
    text = (COMPOSE_DIR / "dyeline.toml").read_text()
    for name, s in sorted(dyeline_services(c).items()):
        cases.append({
            "name": f"compose {name}",
            "deployment": "compose",
            "toml": text,
            "env": env_dict(s.get("environment")),
            "shared_storage": True,
        })
    docs = k8s_docs(K8S_DIR)
    sts = one(by_kind(docs, "StatefulSet"), "StatefulSet")
    cm = one([v for v in pod_spec(sts)["volumes"] if "configMap" in v], "config volume")["configMap"]["name"]
    # The Secret example as written (its placeholder token must be refused) …
    cases.append({
        "name": "k8s secret.example.yaml as written",
        "deployment": "k8s-example-secret",
        "toml": configmap_toml(docs, cm),
        "env": k8s_env(docs, sts, f"{sts['metadata']['name']}-0"),
        "shared_storage": True,
        "refused_with": "DYELINE_API_TOKEN",
    })
    # … and filled in: every pod of the StatefulSet.
    filled = {
        "DYELINE_API_TOKEN": "k8s-test-token-0123456789abcdef",
        "DYELINE_CATALOG__POSTGRES_URL": "postgres://dyeline:secret@postgres.example.internal:5432/dyeline",
    }
    for i in range(sts["spec"]["replicas"]):
        pod = f"{sts['metadata']['name']}-{i}"
        cases.append({
            "name": f"k8s {pod}",
            "deployment": "k8s",
            "toml": configmap_toml(docs, cm),
            "env": k8s_env(docs, sts, pod, filled),
            "shared_storage": True,
        })
    sdocs = k8s_docs(K8S_DIR / "single-node")
    dep = one(by_kind(sdocs, "Deployment"), "Deployment")
    scm = one([v for v in pod_spec(dep)["volumes"] if "configMap" in v], "config volume")["configMap"]["name"]
    cases.append({
        "name": "k8s single-node",
        "deployment": "k8s-single",
        "toml": configmap_toml(sdocs, scm),
        "env": k8s_env(sdocs, dep, f"{dep['metadata']['name']}-0"),
        "shared_storage": False,
    })
    return cases


# ------------------------------------------------------------------------------ mutations ----

# Each check must fail when its file is wrong: (file, text, replacement, the check that must
# fail). `mutants` applies each to a copy of the repository and runs that check on it; a text
# no longer found fails the run too, so the list cannot go stale silently.
D, C, K, S = "deploy/docker/", "deploy/compose/", "deploy/k8s/", "deploy/k8s/single-node/"
G = "deploy/grafana/provisioning/"
MUTATIONS = [
    (D + "Dockerfile", "cargo build --release --locked --bin dyeline", "cargo build --release --bin dyeline", "check_dockerfile"),
    (D + "Dockerfile", "USER 10001:10001", "USER root", "check_dockerfile"),
    (D + "Dockerfile", 'CMD ["serve", "--config", "/etc/dyeline/dyeline.toml"]', 'CMD ["serve"]', "check_dockerfile"),
    (D + "Dockerfile", "/healthz", "/health", "check_dockerfile"),
    (D + "Dockerfile", "--no-install-recommends ca-certificates", "--no-install-recommends ca-certificates curl", "check_dockerfile"),
    (D + "Dockerfile", "EXPOSE 4317 4318 8080", "EXPOSE 4317 8080", "check_dockerfile"),
    (D + "Dockerfile", "FROM debian:${DEBIAN_RELEASE}-slim AS runtime", "FROM debian:bookworm-slim AS runtime", "check_dockerfile"),
    (D + "Dockerfile", "VOLUME [\"/var/lib/dyeline\"]", "VOLUME [\"/srv\"]", "check_dockerfile"),
    (D + "dyeline.toml", "read_requires_token = true", "read_requires_token = false", "check_dockerfile"),
    (".dockerignore", "deploy/k8s\n", "deploy/k8s\nstorage\n", "check_dockerignore"),
    (".dockerignore", "\ntarget\n", "\n", "check_dockerignore"),
    (C + "compose.yaml", "    hostname: dyeline-1\n", "    hostnam: dyeline-1\n", "check_compose_schema"),
    (C + "compose.yaml", "${DYELINE_API_TOKEN:?", "${DYELINE_API_TOKEN:-", "check_compose_schema"),
    (C + "compose.yaml", "DYELINE_CLUSTER__NODE_ID: dyeline-3", "DYELINE_CLUSTER__NODE_ID: dyeline-2", "check_compose_wiring"),
    (C + "compose.yaml", '"127.0.0.1:8081:8080"', '"8081:8080"', "check_compose_wiring"),
    (C + "compose.yaml", "- dyeline-3-data:/var/lib/dyeline", "- dyeline-2-data:/var/lib/dyeline", "check_compose_wiring"),
    (C + "compose.yaml", "- ./dyeline.toml:/etc/dyeline/dyeline.toml:ro\n      - dyeline-2", "- ./dyeline.toml:/etc/dyeline/dyeline.toml\n      - dyeline-2", "check_compose_wiring"),
    (C + "compose.yaml", "      - -bucket=dyeline-spans\n", "", "check_compose_wiring"),
    (C + "compose.yaml", "    condition: service_healthy", "    condition: service_started", "check_compose_wiring"),
    (C + "seaweedfs-s3.json", '"secretKey": "dyeline-demo-secret-key"', '"secretKey": "another-key"', "check_compose_wiring"),
    (C + "dyeline.toml", "dyeline:dyeline-demo-password@postgres", "dyeline:wrong-password@postgres", "check_compose_wiring"),
    (C + "dyeline.toml", 'alertmanager_url = "http://alertmanager:9093"', 'alertmanager_url = "http://127.0.0.1:9093"', "check_compose_wiring"),
    (C + "otel-collector.yaml", "routing_key: traceID", "routing_key: service", "check_compose_collector"),
    (C + "otel-collector.yaml", "        hostnames:\n", "        hostname:\n", "check_compose_collector"),
    (C + "otel-collector.yaml", "          - dyeline-3:4317\n", "", "check_compose_collector"),
    (C + "otel-collector.yaml", "insecure: true", "insecure: false", "check_compose_collector"),
    (C + "otel-collector.yaml", "        timeout: 10s\n", "        timeout: 10s\n        endpoint: dyeline-1:4317\n", "check_compose_collector"),
    (C + "otel-collector.yaml", "    routing_key: traceID\n", "    routing_key: traceID\n    routing: traceID\n", "check_compose_collector"),
    (C + "otel-collector.yaml", "      exporters: [loadbalancing]\n", "      exporters: [otlp]\n", "check_compose_collector"),
    (C + "alertmanager.yml", "  receiver: shown-only", "  receiver: nobody", "check_alertmanager_config"),
    (K + "statefulset.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", "check_k8s_schemas"),
    (S + "deployment.yaml", "  replicas: 1", "  replicas: one", "check_k8s_schemas"),
    (K + "statefulset.yaml", "  replicas: 3", "  replicas: 2", "check_k8s_cluster"),
    (K + "statefulset.yaml", "fieldPath: metadata.name", "fieldPath: metadata.uid", "check_k8s_cluster"),
    (K + "statefulset.yaml", "path: /readyz", "path: /livez", "check_k8s_cluster"),
    (K + "statefulset.yaml", "runAsNonRoot: true", "runAsNonRoot: false", "check_k8s_cluster"),
    (K + "statefulset.yaml", "    - metadata:\n        name: data\n", "    - metadata:\n        name: state\n", "check_k8s_cluster"),
    (K + "statefulset.yaml", "key: DYELINE_API_TOKEN", "key: API_TOKEN", "check_k8s_cluster"),
    (K + "service-headless.yaml", "  clusterIP: None\n", "", "check_k8s_cluster"),
    (K + "configmap.yaml", 'api_addr = "0.0.0.0:8080"', 'api_addr = "0.0.0.0:9090"', "check_k8s_cluster"),
    (K + "secret.example.yaml", "DYELINE_API_TOKEN: REPLACE-ME", "DYELINE_API_TOKEN: REPLACE-ME-WITH-A-LONG-TOKEN", "check_k8s_cluster"),
    (K + "service.yaml", "targetPort: api", "targetPort: http", "check_k8s_cluster"),
    (K + "kustomization.yaml", "  - pdb.yaml\n", "", "check_kustomizations"),
    (S + "kustomization.yaml", "  - pvc.yaml\n", "  - pvc.yaml\n  - pvc.yaml\n", "check_kustomizations"),
    (S + "deployment.yaml", "type: Recreate", "type: RollingUpdate", "check_k8s_single"),
    (S + "deployment.yaml", "  replicas: 1", "  replicas: 2", "check_k8s_single"),
    (S + "deployment.yaml", "claimName: dyeline-data", "claimName: data", "check_k8s_single"),
    (S + "configmap.yaml", "    [alerts]\n", '    [storage]\n    object_store_url = "s3://b/p"\n    [alerts]\n', "check_k8s_single"),
    (K + "collector-configmap.yaml", "hostname: dyeline-headless", "hostname: dyeline", "check_k8s_collector"),
    (K + "collector-configmap.yaml", "routing_key: service", "routing_key: traceID", "check_k8s_collector"),
    (K + "collector-configmap.yaml", 'port: "4317"', 'port: "4318"', "check_k8s_collector"),
    (K + "collector-deployment.yaml", "--config=/conf/config.yaml", "--config=/conf/otel.yaml", "check_k8s_collector"),
    (G + "datasources/dyeline.yaml", ":8080/jaeger", ":8080/api", "check_grafana"),
    (G + "datasources/dyeline.yaml", "datasourceUid: dyeline-jaeger", "datasourceUid: tempo", "check_grafana"),
    (G + "dashboards/dyeline-release.json", "dyeline_alerts_firing", "dyeline_alert_firing", "check_grafana"),
    (G + "dashboards/dyeline-release.json", '"uid": "dyeline-prometheus"', '"uid": "prom"', "check_grafana"),
    (G + "dashboards/dyeline-release.json", "{", "{{", "check_grafana"),
]


def run_check(name):
    """(passed, message) of the check `name` on the current root."""
    check = next(c for c in CHECKS if c.__name__ == name)
    try:
        return True, check()
    except CheckFailed as e:
        return False, str(e)
    except Exception as e:
        return False, f"{type(e).__name__}: {e}"


def mutants():
    """Applies each mutation to a copy of the repository; the named check must fail on it (and
    every check must pass on the unmutated copy)."""
    real = ROOT
    mutations = list(MUTATIONS)
    killed = survived = 0
    with tempfile.TemporaryDirectory(prefix="dyeline-deploy-mutants-") as tmp:
        copy_root = Path(tmp) / "repo"
        shutil.copytree(real, copy_root, ignore=shutil.ignore_patterns(".git", "target", "__pycache__", "bench"),
                        symlinks=True)
        # bench/ is a workspace member: its manifest and sources are all the checks read of it.
        shutil.copytree(real / "bench", copy_root / "bench", ignore=shutil.ignore_patterns("results", "out", "fuzz", "*.py"))
        set_root(copy_root)
        try:
            for check in CHECKS:
                ok, msg = run_check(check.__name__)
                if not ok:
                    print(f"FAIL baseline {check.__name__} on the unmutated copy: {msg}")
                    return 1
            for rel, old, new, name in mutations:
                path = copy_root / rel
                original = path.read_text()
                if old not in original:
                    print(f"FAIL mutation of {rel}: {old!r} is no longer in the file (update MUTATIONS)")
                    survived += 1
                    continue
                path.write_text(original.replace(old, new))
                try:
                    ok, msg = run_check(name)
                finally:
                    path.write_text(original)
                if ok:
                    print(f"FAIL {name} passed with {rel}: {old!r} -> {new!r}")
                    survived += 1
                else:
                    print(f"ok   {name} fails on {rel}: {old.strip()!r} -> {new.strip()!r}: {msg}")
                    killed += 1
        finally:
            set_root(real)
    print(f"deploy mutants: {killed} passed, {survived} failed")
    return 1 if survived else 0


def check_grafana():
    """deploy/grafana/provisioning (README "Grafana (Jaeger data source)"): the data sources and
    the dashboard provider parse as YAML, the dashboard as JSON; the Jaeger data source points
    at Dyeline's Jaeger API (`/jaeger` on the API port) and the Prometheus one sends exemplars'
    trace ids to it; every panel's data source is one of them; and every `dyeline_*` metric a
    panel queries is one the server registers (names read from its sources, with the suffixes
    Prometheus gives counters and histograms)."""
    g = DEPLOY / "grafana" / "provisioning"
    ds = yaml.safe_load((g / "datasources" / "dyeline.yaml").read_text())
    sources = {d["uid"]: d for d in ds["datasources"]}
    jaeger = [d for d in sources.values() if d["type"] == "jaeger"]
    prom = [d for d in sources.values() if d["type"] == "prometheus"]
    need(len(jaeger) == 1 and len(prom) == 1, "one jaeger and one prometheus data source")
    need(jaeger[0]["url"].rstrip("/").endswith(":8080/jaeger"),
         f"the Jaeger data source's URL is the API port's /jaeger, not {jaeger[0]['url']}")
    dest = prom[0].get("jsonData", {}).get("exemplarTraceIdDestinations", [])
    need(any(d.get("name") == "trace_id" and d.get("datasourceUid") == jaeger[0]["uid"] for d in dest),
         "Prometheus exemplars' trace_id go to the Jaeger data source")
    prov = yaml.safe_load((g / "dashboards" / "dyeline.yaml").read_text())
    need(prov["providers"] and prov["providers"][0]["type"] == "file", "a file dashboard provider")
    dash = json.loads((g / "dashboards" / "dyeline-release.json").read_text())
    registered = set()
    for src in ["queries/src/span_metrics.rs", "server/src/wiring/release_metrics.rs"]:
        registered |= set(re.findall(r'"(dyeline_[a-z_]+)"', (ROOT / src).read_text()))
    known = set()
    for m in registered:
        known |= {m, m + "_total", m + "_bucket", m + "_sum", m + "_count"}
    used = set()
    for panel in dash["panels"]:
        uid = panel["datasource"]["uid"]
        need(uid in sources, f"panel {panel['title']!r}: data source {uid!r} is not provisioned")
        for t in panel["targets"]:
            used |= set(re.findall(r"dyeline_[a-z_]+", t["expr"]))
    need(used, "the dashboard queries Dyeline's metrics")
    unknown = sorted(used - known)
    need(not unknown, f"the dashboard queries metrics the server does not export: {unknown}")
    return f"{len(sources)} data sources, {len(dash['panels'])} panels on {len(used)} metric names"


# ----------------------------------------------------------------------------------- main -----

CHECKS = [
    check_dockerfile,
    check_dockerignore,
    check_compose_schema,
    check_compose_wiring,
    check_compose_collector,
    check_alertmanager_config,
    check_k8s_schemas,
    check_kustomizations,
    check_k8s_cluster,
    check_k8s_single,
    check_k8s_collector,
    check_grafana,
]


def main(argv):
    what = argv[1] if len(argv) > 1 else "check"
    if what == "configs":
        json.dump(configs(), sys.stdout, indent=1)
        return 0
    if what == "healthcheck":
        json.dump(healthcheck_command(), sys.stdout)
        return 0
    if what == "mutants":
        return mutants()
    if what == "kustomize":
        # Not part of `check` (the tests): kubectl is no Debian package here, so CI has none.
        # For a machine with kubectl: both folders rendered by `kubectl kustomize`.
        try:
            print(f"ok   {check_kubectl_kustomize()}")
            return 0
        except Exception as e:  # noqa: BLE001
            print(f"FAIL check_kubectl_kustomize: {e}")
            return 1
    if what != "check":
        print(__doc__, file=sys.stderr)
        return 2
    only = argv[2:]
    passed = failed = 0
    for check in CHECKS:
        if only and not any(o in check.__name__ for o in only):
            continue
        try:
            said = check()
            print(f"ok   {check.__name__}: {said}")
            passed += 1
        except CheckFailed as e:
            print(f"FAIL {check.__name__}: {e}")
            failed += 1
        except Exception as e:  # a crash in a check is a failure of it, with its type
            print(f"FAIL {check.__name__}: {type(e).__name__}: {e}")
            failed += 1
    print(f"deploy: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
