#!/usr/bin/env python3
"""The incident storm of scripts/bench-storm: stage it on the real API server tier, play the
kubelet that serves its logs, post its alerts, and measure how the daemon decided them.

Standard library only (the kube tier's machines have python3 and nothing else promised).

  storm.py kubelet PORT CERT KEY LOGS       a kubelet's log endpoint over TLS, for the API
                                            server's log proxy (the tier has no kubelet)
  storm.py stage  OUT                       stage the storm (env: STORM_*, KUBE_*), write the
                                            alert groups and the logs map into OUT
  storm.py counters                         print the API server's request counters (JSON)
  storm.py post   OUT                       post OUT/groups.json to the daemon's webhook
  storm.py report OUT                       wait for the decisions, print the figures

What is staged (docs/benchmarks.md, "Incident storm"): STORM_WORKLOADS Deployments in
STORM_NAMESPACES namespaces, every one failing, on STORM_NODES Ready nodes and one NotReady
node. STORM_SHARED_PERCENT of them (default 20) share a cause, half each: their pods run on the
failing node (KubePodNotReady), or they crash-loop because one database in namespace
storm-shared was scaled to zero (KubePodCrashLooping, "connection refused" in their logs). The
rest fail on their own, in turn: a rollout to a new image that crash-loops (the previous revision
still serving), OOMKilled, and one pod of two crash-looping where its sibling runs. One more
alert, KubeNodeNotReady, is about the failing node. Pods are created by the real
controller-manager from the Deployments; this script plays the scheduler and the kubelet, as the
tests do: a Binding, the status subresource, Events, and logs served over TLS.
"""

import concurrent.futures as cf
import hashlib
import http.client
import http.server
import json
import os
import random
import socketserver
import sqlite3
import ssl
import sys
import threading
import time
import urllib.parse
from datetime import datetime, timedelta, timezone

SHARED_NS = "storm-shared"
BAD_NODE = "storm-node-failing"
DB_HOST = f"db.{SHARED_NS}.svc.cluster.local"
WORDS = [
    "checkout", "cart", "search", "ledger", "billing", "catalog", "render", "mailer", "auth",
    "orders", "payments", "profile", "reviews", "shipping", "tiles", "pricing", "inventory",
    "gateway", "notify", "reports",
]
# The phases in which a request has been decided (src/domain/phase.rs): the gate sent it to a
# human (AwaitingApproval) or let it run (Executing, then Verifying, Completed), or it ended with
# a decision (no action needed, a person must look, rejected, blocked by a guardrail, expired).
# Failed is not a decision: the request broke.
DECIDED = {
    "AwaitingApproval", "Executing", "Verifying", "Completed", "NoActionRequired",
    "ManualReviewRequired", "Rejected", "Expired", "Blocked",
}


def log(msg):
    print(f"[storm {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


def now_utc():
    return datetime.now(timezone.utc)


def ago(secs):
    return (now_utc() - timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------
# The API server, over keep-alive HTTPS connections (one per thread).


class Kube:
    def __init__(self):
        self.server = urllib.parse.urlparse(os.environ["KUBE_SERVER"])
        self.token = os.environ["KUBE_TOKEN"]
        self.ctx = ssl.create_default_context(cafile=os.environ["KUBE_CA_FILE"])
        self.local = threading.local()

    def _conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = http.client.HTTPSConnection(
                self.server.hostname, self.server.port, context=self.ctx, timeout=60
            )
            self.local.conn = c
        return c

    def call(self, method, path, body=None, content_type="application/json", ok=(200, 201)):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in range(6):
            try:
                c = self._conn()
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
                raw = r.read()
            except (OSError, http.client.HTTPException):
                self.local.conn = None
                time.sleep(0.2 * (attempt + 1))
                continue
            if r.status in (429, 500, 503, 504) and attempt < 5:
                time.sleep(0.5 * (attempt + 1))
                continue
            if r.status not in ok:
                raise RuntimeError(f"{method} {path}: {r.status} {raw[:300]!r}")
            return json.loads(raw) if raw and raw[:1] in (b"{", b"[") else raw
        raise RuntimeError(f"{method} {path}: no answer")

    def get(self, path, ok=(200,)):
        return self.call("GET", path, ok=ok)

    def create(self, path, obj, ok=(200, 201)):
        return self.call("POST", path, obj, ok=ok)

    def merge(self, path, patch):
        return self.call("PATCH", path, patch, "application/merge-patch+json")

    def text(self, path):
        c = http.client.HTTPSConnection(
            self.server.hostname, self.server.port, context=self.ctx, timeout=30
        )
        c.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
        r = c.getresponse()
        return r.read().decode()


def parallel(fn, items, workers=16):
    """fn over items on a thread pool; the first error stops the run."""
    with cf.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, items))


def wait_for(what, secs, probe, every=1.0):
    deadline = time.time() + secs
    while True:
        v = probe()
        if v:
            return v
        if time.time() > deadline:
            raise RuntimeError(f"timed out after {secs} s waiting for {what}")
        time.sleep(every)


# ---------------------------------------------------------------------------------------------
# Objects, as the tests build them (tests/common/kube.rs, tests/common/scenarios.rs).


def deployment(name, image, replicas, memory="256Mi", env=None):
    container = {
        "name": name.rsplit("-", 1)[0],
        "image": image,
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": memory}},
    }
    if env:
        container["env"] = env
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}},
        },
    }


def running(container, image):
    return {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "ContainersReady", "status": "True"},
            {"type": "PodScheduled", "status": "True"},
        ],
        "containerStatuses": [{
            "name": container, "image": image, "imageID": "", "ready": True, "restartCount": 0,
            "started": True, "state": {"running": {"startedAt": ago(3600)}},
        }],
    }


def crash_loop(container, image, restarts, code, reason):
    return {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
             "message": f"containers with unready status: [{container}]"},
            {"type": "PodScheduled", "status": "True"},
        ],
        "containerStatuses": [{
            "name": container, "image": image, "imageID": "", "ready": False,
            "restartCount": restarts, "started": False,
            "state": {"waiting": {"reason": "CrashLoopBackOff",
                                  "message": f"back-off 5m0s restarting failed container={container}"}},
            "lastState": {"terminated": {"exitCode": code, "reason": reason,
                                         "startedAt": ago(70), "finishedAt": ago(60)}},
        }],
    }


def on_failing_node(container, image):
    """A pod on a node that stopped reporting: the node controller marked it not ready; the
    container state is the last the kubelet sent."""
    st = running(container, image)
    st["conditions"] = [
        {"type": "Ready", "status": "False", "lastTransitionTime": ago(600)},
        {"type": "ContainersReady", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]
    return st


def node_object(name, port, pods):
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": []},
    }, {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "capacity": {"cpu": "16", "memory": "64Gi", "pods": str(pods)},
        "allocatable": {"cpu": "16", "memory": "64Gi", "pods": str(pods)},
        "nodeInfo": {"kubeletVersion": "v1.20.2", "machineID": "", "systemUUID": "", "bootID": "",
                     "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                     "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
    }


# ---------------------------------------------------------------------------------------------
# The fake kubelet: container logs for the API server's log proxy.


def kubelet(port, cert, key, logs_file):
    state = {"mtime": None, "logs": {}}
    lock = threading.Lock()

    def logs():
        with lock:
            try:
                m = os.stat(logs_file).st_mtime
            except OSError:
                return {}
            if m != state["mtime"]:
                with open(logs_file) as f:
                    state["logs"] = json.load(f)
                state["mtime"] = m
            return state["logs"]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            u = urllib.parse.urlparse(self.path)
            q = urllib.parse.parse_qs(u.query)
            parts = u.path.removeprefix("/containerLogs/").split("/")
            previous = q.get("previous", ["false"])[0] == "true"
            text = None
            if len(parts) == 3:
                text = logs().get("/".join(parts + ["previous" if previous else "current"]))
            if text is None:
                status, body = 404, f"container not found ({u.path})"
            else:
                lines = text.splitlines()
                tail = q.get("tailLines")
                if tail:
                    lines = lines[-int(tail[0]):] if int(tail[0]) > 0 else []
                status, body = 200, "".join(line + "\n" for line in lines)
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv = Server(("127.0.0.1", port), Handler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()


# ---------------------------------------------------------------------------------------------
# Staging.


def plan(workloads, namespaces, shared_percent, seed=40):
    """(namespace, deployment, class) for every workload. Classes: node and dependency (the
    shared causes, half of the shared share each), then rollout / oom / lone in turn."""
    shared = workloads * shared_percent // 100
    n_node = shared - shared // 2
    n_dep = shared // 2
    own = ["rollout", "oom", "lone"]
    classes = ["node"] * n_node + ["dependency"] * n_dep
    classes += [own[i % 3] for i in range(workloads - shared)]
    random.Random(seed).shuffle(classes)
    out = []
    for i, cls in enumerate(classes):
        ns = f"storm-{i % namespaces:03d}"
        name = f"{WORDS[i % len(WORDS)]}-{i:04d}"
        out.append((ns, name, cls))
    return out


def pods_of(kube, namespaces):
    """Every pod in the storm's namespaces, by (namespace, app label)."""
    by_app = {}

    def one(ns):
        return kube.get(f"/api/v1/namespaces/{ns}/pods")["items"]

    for items in parallel(one, namespaces, 8):
        for p in items:
            if p["metadata"].get("deletionTimestamp"):
                continue
            app = p["metadata"].get("labels", {}).get("app", "")
            by_app.setdefault((p["metadata"]["namespace"], app), []).append(p)
    for pods in by_app.values():
        pods.sort(key=lambda p: p["metadata"]["name"])
    return by_app


class Storm:
    """The storm on one cluster: what is planned, and the steps that stage it in order."""

    # Replicas and memory limits that differ from one replica of 512Mi.
    REPLICAS = {"lone": 2}
    MEMORY = {"oom": "256Mi"}

    def __init__(self, kube):
        self.kube = kube
        self.workloads = env_int("STORM_WORKLOADS", 1000)
        self.namespaces = env_int("STORM_NAMESPACES", 100)
        self.nodes = env_int("STORM_NODES", 20)
        self.kubelet_port = env_int("STORM_KUBELET_PORT", 0)
        self.dead_port = env_int("STORM_DEAD_PORT", 1)
        if self.workloads < 1 or self.namespaces < 1 or self.namespaces > self.workloads:
            raise SystemExit("STORM_WORKLOADS >= STORM_NAMESPACES >= 1, please")
        self.work = plan(self.workloads, self.namespaces, env_int("STORM_SHARED_PERCENT", 20))
        self.ns_names = sorted({ns for ns, _, _ in self.work})
        self.workers = [f"storm-node-{i:02d}" for i in range(1, self.nodes + 1)]
        self.rollouts = [w for w in self.work if w[2] == "rollout"]
        self.failing = []  # (namespace, deployment, class, pod, node)
        self.lock = threading.Lock()
        self.turn = 0

    # -- small writes, as a scheduler, kubelet or controller makes them

    def next_worker(self):
        with self.lock:
            self.turn += 1
            return self.workers[self.turn % len(self.workers)]

    def bind(self, ns, pod, node):
        self.kube.create(f"/api/v1/namespaces/{ns}/pods/{pod}/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    def status(self, ns, pod, st):
        self.kube.merge(f"/api/v1/namespaces/{ns}/pods/{pod}/status", {"status": st})

    def event(self, ns, pod, reason, message, count, component, host=""):
        self.kube.create(f"/api/v1/namespaces/{ns}/events", {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{pod['metadata']['name']}.{os.urandom(8).hex()}", "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                               "namespace": ns, "uid": pod["metadata"]["uid"]},
            "reason": reason, "message": message, "type": "Warning", "count": count,
            "firstTimestamp": ago(600), "lastTimestamp": ago(20),
            "source": {"component": component, "host": host}})

    # -- the steps, in order

    def make_nodes(self):
        """Ready workers whose kubelet is the fake one, and one NotReady for ten minutes whose
        kubelet does not answer."""
        capacity = max(110, (self.workloads * 2) // max(self.nodes, 1) + 20)

        def make(name):
            bad = name == BAD_NODE
            obj, status = node_object(name, self.dead_port if bad else self.kubelet_port, capacity)
            self.kube.create("/api/v1/nodes", obj)
            status["conditions"] = [failing_node_ready() if bad else {
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": ago(0), "lastTransitionTime": ago(86400)}]
            self.kube.merge(f"/api/v1/nodes/{name}/status", {"status": status})
            # Admission tainted the new node not-ready; the node lifecycle controller (off in
            # the tier) would lift that from a Ready node.
            self.kube.merge(f"/api/v1/nodes/{name}", {"spec": {"taints": []}})

        parallel(make, self.workers + [BAD_NODE])

    def make_namespaces(self):
        """The namespaces, once their default ServiceAccount has its token (1.20 refuses pods
        before)."""
        names = self.ns_names + [SHARED_NS, "kubemedic"]
        parallel(lambda ns: self.kube.create("/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}), names)

        def has_token(ns):
            sa = self.kube.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default", ok=(200, 404))
            return isinstance(sa, dict) and bool(sa.get("secrets"))

        wait_for("the namespaces' default ServiceAccount tokens", 180,
                 lambda: all(parallel(has_token, names, 8)))

    def make_deployments(self):
        """The shared database and its Service, and every Deployment at its first revision;
        returns their pods once the controller-manager made them all."""
        self.kube.create(f"/apis/apps/v1/namespaces/{SHARED_NS}/deployments", _db_deployment())
        self.kube.create(f"/api/v1/namespaces/{SHARED_NS}/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "db"},
            "spec": {"selector": {"app": "db"},
                     "ports": [{"name": "postgres", "port": 5432, "targetPort": "postgres"}]}})

        def make(w):
            ns, name, cls = w
            word = name.rsplit("-", 1)[0]
            env = None
            if cls == "dependency":
                env = [{"name": "DATABASE_URL", "value": f"postgres://{DB_HOST}:5432/{word}"}]
            self.kube.create(f"/apis/apps/v1/namespaces/{ns}/deployments",
                             deployment(name, f"shop/{word}:1.4.1", self.REPLICAS.get(cls, 1),
                                        self.MEMORY.get(cls, "512Mi"), env))

        parallel(make, self.work)
        self.first_pods = sum(self.REPLICAS.get(cls, 1) for _, _, cls in self.work)
        log(f"{len(self.work)} Deployments created; waiting for the controller-manager's "
            f"{self.first_pods} pods")

        def all_made():
            by_app = pods_of(self.kube, self.ns_names + [SHARED_NS])
            made = sum(len(v) for k, v in by_app.items() if k[0] != SHARED_NS)
            return by_app if made >= self.first_pods and (SHARED_NS, "db") in by_app else None

        return wait_for(f"{self.first_pods} pods", 1800, all_made, every=2.0)

    def schedule(self, by_app):
        """Bind every pod (round robin over the workers; the node class on the failing node) and
        report the healthy ones running: the rollouts' first revision, the lone failures'
        siblings, the database. Failures are reported last (fail), so their ages are fresh."""

        def one(w):
            ns, name, cls = w
            pods = by_app[(ns, name)]
            c = pods[0]["spec"]["containers"][0]
            if cls == "node":
                self.bind(ns, pods[0]["metadata"]["name"], BAD_NODE)
                return [(ns, name, cls, pods[0], BAD_NODE)]
            if cls in ("rollout", "lone"):
                self.bind(ns, pods[0]["metadata"]["name"], self.next_worker())
                self.status(ns, pods[0]["metadata"]["name"], running(c["name"], c["image"]))
            if cls == "rollout":
                return []
            node = self.next_worker()
            self.bind(ns, pods[-1]["metadata"]["name"], node)
            return [(ns, name, cls, pods[-1], node)]

        for got in parallel(one, self.work):
            self.failing.extend(got)
        db = by_app[(SHARED_NS, "db")][0]["metadata"]["name"]
        self.bind(SHARED_NS, db, self.workers[0])
        self.status(SHARED_NS, db, running("db", "postgres:15.4"))

    def roll_out(self):
        """Once the first revision is available, each rollout Deployment moves to an image
        whose pod crash-loops (the first revision's pod keeps serving: maxUnavailable 0)."""
        if not self.rollouts:
            return
        namespaces = sorted({ns for ns, _, _ in self.rollouts})

        def available():
            ready = set()
            for ns in namespaces:
                for d in self.kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments")["items"]:
                    if d.get("status", {}).get("readyReplicas", 0) >= 1:
                        ready.add((ns, d["metadata"]["name"]))
            return all((ns, name) in ready for ns, name, _ in self.rollouts)

        wait_for("the rollouts' first revision available", 900, available, every=2.0)

        def roll(w):
            ns, name, _ = w
            word = name.rsplit("-", 1)[0]
            self.kube.merge(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}", {"spec": {
                "template": {"spec": {"containers": [{"name": word, "image": f"shop/{word}:1.4.2"}]}}}})

        parallel(roll, self.rollouts)

        def new_pods():
            by_app = pods_of(self.kube, namespaces)
            found = {}
            for ns, name, _ in self.rollouts:
                for p in by_app.get((ns, name), []):
                    if p["spec"]["containers"][0]["image"].endswith(":1.4.2"):
                        found[(ns, name)] = p
            return found if len(found) == len(self.rollouts) else None

        fresh = wait_for("the rollouts' new pods", 900, new_pods, every=2.0)

        def bind_new(w):
            ns, name, cls = w
            node = self.next_worker()
            self.bind(ns, fresh[(ns, name)]["metadata"]["name"], node)
            return (ns, name, cls, fresh[(ns, name)], node)

        self.failing.extend(parallel(bind_new, self.rollouts))

    def break_dependency(self):
        """The database goes away: scaled to zero, its pod confirmed gone (there is no kubelet
        to do it), its Service's endpoints emptied by the endpoints controller."""
        self.kube.merge(f"/apis/apps/v1/namespaces/{SHARED_NS}/deployments/db",
                        {"spec": {"replicas": 0}})

        def gone():
            pods = self.kube.get(f"/api/v1/namespaces/{SHARED_NS}/pods")["items"]
            for p in pods:
                if p["metadata"].get("deletionTimestamp"):
                    self.kube.call(
                        "DELETE", f"/api/v1/namespaces/{SHARED_NS}/pods/{p['metadata']['name']}",
                        {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                        ok=(200, 202, 404))
            ep = self.kube.get(f"/api/v1/namespaces/{SHARED_NS}/endpoints/db", ok=(200, 404))
            addresses = isinstance(ep, dict) and any(
                s.get("addresses") for s in ep.get("subsets") or [])
            return not pods and not addresses

        wait_for("the database scaled to zero", 120, gone)

    def fail(self):
        """Every failure as the kubelet (or the node controller) reports it, with its Events;
        returns the logs the fake kubelet serves and one alert per failing pod, and one about
        the failing node."""

        def one(f):
            ns, _, cls, pod, node = f
            pname = pod["metadata"]["name"]
            c = pod["spec"]["containers"][0]
            container, image, word = c["name"], c["image"], c["name"]
            if cls == "node":
                self.status(ns, pname, on_failing_node(container, image))
                self.event(ns, pod, "NodeNotReady", "Node is not ready", 1, "node-controller")
                return None, None, alert(
                    "KubePodNotReady", "warning", ns, pname, None,
                    f"Pod {ns}/{pname} has been in a non-ready state for longer than 15 minutes.")
            st, text = FAILURES[cls](container, image, word)
            self.status(ns, pname, st)
            self.event(ns, pod, "BackOff", "Back-off restarting failed container", 9, "kubelet", node)
            return f"{ns}/{pname}/{container}", text, alert(
                "KubePodCrashLooping", "warning" if cls == "oom" else "critical", ns, pname,
                container,
                f"Pod {ns}/{pname} ({container}) is in waiting state (reason: CrashLoopBackOff).")

        logs, alerts = {}, []
        for key, text, a in parallel(one, self.failing):
            if text is not None:
                logs[f"{key}/previous"] = text
                logs[f"{key}/current"] = text.splitlines()[0] + "\n"
            alerts.append(a)
        # The node's condition again, its heartbeat as old as its failure.
        self.kube.merge(f"/api/v1/nodes/{BAD_NODE}/status",
                        {"status": {"conditions": [failing_node_ready()]}})
        alerts.append(node_alert())
        return logs, alerts


def failing_node_ready():
    t = ago(600)
    return {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
            "message": "PLEG is not healthy: pleg was last seen active 10m0s ago",
            "lastHeartbeatTime": t, "lastTransitionTime": t}


# How each class of independent or shared failure crash-loops: (status, previous log) from
# (container, image, word).
FAILURES = {
    "rollout": lambda c, image, w: (
        crash_loop(c, image, 6, 1, "Error"),
        f"starting {w} 1.4.2\nloading configuration\npanic: required setting "
        f"{w.upper()}_API_KEY_V2 is not set (new in 1.4.2)\n"),
    "oom": lambda c, image, w: (
        crash_loop(c, image, 4, 137, "OOMKilled"),
        f"starting {w} 1.4.1\ncaching 1.9GB catalogue in memory\n"),
    "lone": lambda c, image, w: (
        crash_loop(c, image, 5, 1, "Error"),
        f"{w} 1.4.1\nloading cache from /var/cache/{w}\n"
        "panic: corrupt cache segment 17: checksum mismatch\n"),
    "dependency": lambda c, image, w: (
        crash_loop(c, image, 7, 2, "Error"),
        f"{w} 1.4.1\nconnecting to {DB_HOST}:5432\nfatal: cannot connect to database "
        f"{DB_HOST}:5432: connection refused\n"),
}


def stage(out):
    started = time.time()
    storm = Storm(Kube())
    counts = {}
    for _, _, cls in storm.work:
        counts[cls] = counts.get(cls, 0) + 1
    log(f"staging {storm.workloads} Deployments in {len(storm.ns_names)} namespaces on "
        f"{storm.nodes} nodes + {BAD_NODE}: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}")

    def step(what, fn, *args):
        t0 = time.time()
        v = fn(*args)
        log(f"{what} ({time.time() - t0:.0f} s)")
        return v

    step("nodes made", storm.make_nodes)
    step("namespaces ready", storm.make_namespaces)
    by_app = step("pods made by the controllers", storm.make_deployments)
    step("pods scheduled, the healthy ones running", storm.schedule, by_app)
    step(f"{len(storm.rollouts)} rollouts to a crash-looping image", storm.roll_out)
    step("the shared database scaled to zero", storm.break_dependency)
    logs, alerts = step(f"{len(storm.failing)} pods failing, with their events", storm.fail)

    tmp = os.path.join(out, "logs.json.tmp")
    with open(tmp, "w") as f:
        json.dump(logs, f)
    os.replace(tmp, os.path.join(out, "logs.json"))
    groups = alertmanager_groups(alerts)
    with open(os.path.join(out, "groups.json"), "w") as f:
        json.dump(groups, f)
    with open(os.path.join(out, "plan.json"), "w") as f:
        json.dump([{"namespace": ns, "deployment": name, "class": cls}
                   for ns, name, cls in storm.work], f)
    summary = {"workloads": storm.workloads, "namespaces": len(storm.ns_names),
               "nodes": storm.nodes, "classes": counts, "alerts": len(alerts),
               "groups": len(groups), "pods": storm.first_pods + len(storm.rollouts),
               "staging_seconds": round(time.time() - started, 1)}
    with open(os.path.join(out, "staged.json"), "w") as f:
        json.dump(summary, f)
    log(f"staged in {time.time() - started:.0f} s: {len(alerts)} alerts in {len(groups)} groups")


def _db_deployment():
    d = deployment("db-0000", "postgres:15.4", 1, "1Gi")
    d["metadata"] = {"name": "db", "labels": {"app": "db"}}
    d["spec"]["selector"] = {"matchLabels": {"app": "db"}}
    d["spec"]["strategy"] = {"type": "Recreate"}
    tpl = d["spec"]["template"]
    tpl["metadata"]["labels"] = {"app": "db"}
    tpl["spec"]["containers"][0]["name"] = "db"
    tpl["spec"]["containers"][0]["ports"] = [{"containerPort": 5432, "name": "postgres"}]
    return d


def alert(name, severity, ns, pod, container, description):
    labels = {"alertname": name, "severity": severity, "namespace": ns, "pod": pod,
              "job": "kube-state-metrics"}
    if container:
        labels["container"] = container
    summary = "Pod is crash looping." if name == "KubePodCrashLooping" else "Pod has been in a non-ready state for more than 15 minutes."
    return {"labels": labels, "annotations": {"summary": summary, "description": description}}


def node_alert():
    return {"labels": {"alertname": "KubeNodeNotReady", "severity": "critical",
                       "namespace": "monitoring", "node": BAD_NODE, "job": "kube-state-metrics"},
            "annotations": {"summary": "Node is not ready.",
                            "description": f"{BAD_NODE} has been unready for more than 15 minutes."}}


def alertmanager_groups(alerts, per_post=50):
    """Alertmanager's webhook bodies: grouped by namespace (a route's `group_by: [namespace]`),
    at most `per_post` alerts a body (`max_alerts`); times are filled in when posted."""
    by_ns = {}
    for a in alerts:
        by_ns.setdefault(a["labels"]["namespace"], []).append(a)
    groups = []
    for ns in sorted(by_ns):
        items = by_ns[ns]
        for i in range(0, len(items), per_post):
            part = items[i:i + per_post]
            common = dict(part[0]["labels"])
            for a in part[1:]:
                common = {k: v for k, v in common.items() if a["labels"].get(k) == v}
            common_ann = dict(part[0]["annotations"])
            for a in part[1:]:
                common_ann = {k: v for k, v in common_ann.items() if a["annotations"].get(k) == v}
            for a in part:
                fp = hashlib.sha256(json.dumps(a["labels"], sort_keys=True).encode()).hexdigest()[:16]
                a.update({"status": "firing", "endsAt": "0001-01-01T00:00:00Z",
                          "generatorURL": "http://prometheus.storm:9090/graph?g0.expr=kube_pod_status_ready",
                          "fingerprint": fp})
            groups.append({
                "version": "4", "status": "firing", "receiver": "kubemedic",
                "groupKey": f'{{}}:{{namespace="{ns}"}}', "truncatedAlerts": 0,
                "groupLabels": {"namespace": ns}, "commonLabels": common,
                "commonAnnotations": common_ann, "externalURL": "http://alertmanager.storm:9093",
                "alerts": part,
            })
    # Alertmanager flushes groups in no particular order.
    random.Random(41).shuffle(groups)
    return groups


# ---------------------------------------------------------------------------------------------
# Counting the daemon's API requests.


def counters():
    """The API server's counters that tell the daemon's requests from everyone else's: requests
    dispatched by API Priority and Fairness, by flow schema (the daemon's user is the only one
    not in system:masters, so it alone lands in global-default; long-running requests bypass
    APF), and long-running ones from apiserver_request_total (log reads: only the daemon reads
    logs; watches)."""
    kube = Kube()
    text = kube.text("/metrics")
    out = {"dispatched": {}, "rejected": {}, "requests_total": 0, "log": 0, "watch": 0,
           "codes": {}, "errors": {}, "by_request": {}}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, rest = line.partition("{")
        labels_s, _, value = rest.rpartition("} ")
        try:
            v = float(value)
        except ValueError:
            continue
        labels = dict(kv.split("=", 1) for kv in _split_labels(labels_s))
        labels = {k: v_.strip('"') for k, v_ in labels.items()}
        if name == "apiserver_flowcontrol_dispatched_requests_total":
            fs = labels.get("flowSchema", labels.get("flow_schema", ""))
            out["dispatched"][fs] = out["dispatched"].get(fs, 0) + v
        elif name == "apiserver_flowcontrol_rejected_requests_total":
            fs = labels.get("flowSchema", labels.get("flow_schema", ""))
            out["rejected"][fs] = out["rejected"].get(fs, 0) + v
        elif name == "apiserver_request_total":
            out["requests_total"] += v
            if labels.get("subresource") == "log":
                out["log"] += v
            if labels.get("verb") == "WATCH":
                out["watch"] += v
            code = labels.get("code", "")
            out["codes"][code] = out["codes"].get(code, 0) + v
            what = " ".join(x for x in (labels.get("verb", ""), labels.get("scope", ""),
                                        labels.get("resource", ""), labels.get("subresource", ""),
                                        code,
                                        "dry-run" if labels.get("dry_run") else "") if x)
            out["by_request"][what] = out["by_request"].get(what, 0) + v
            if code.startswith(("4", "5")):
                what = " ".join(x for x in (code, labels.get("verb", ""), labels.get("resource", ""),
                                            labels.get("subresource", "")) if x)
                out["errors"][what] = out["errors"].get(what, 0) + v
    return out


def _split_labels(s):
    parts, cur, quoted, esc = [], "", False, False
    for ch in s:
        if esc:
            cur += ch
            esc = False
        elif ch == "\\":
            cur += ch
            esc = True
        elif ch == '"':
            cur += ch
            quoted = not quoted
        elif ch == "," and not quoted:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    return [p for p in parts if "=" in p]


# ---------------------------------------------------------------------------------------------
# Posting the storm.


def post(out):
    url = urllib.parse.urlparse(os.environ["DAEMON_URL"])
    token = os.environ["WEBHOOK_TOKEN"]
    window = float(os.environ.get("STORM_POST_SECONDS", "10"))
    with open(os.path.join(out, "groups.json")) as f:
        groups = json.load(f)
    n = len(groups)
    # Spread over the window: the last group leaves at most `window` seconds after the first.
    gap = window / n if n > 1 else 0.0
    start = time.time() + 0.2
    sent = []
    lock = threading.Lock()

    def send(j):
        g = groups[j]
        delay = start + j * gap - time.time()
        if delay > 0:
            time.sleep(delay)
        at = time.time()
        starts = datetime.fromtimestamp(at - 120, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for a in g["alerts"]:
            a["startsAt"] = starts
        body = json.dumps(g).encode()
        for attempt in range(5):
            try:
                c = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
                c.request("POST", "/api/v1/alerts/alertmanager", body=body, headers={
                    "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
                r = c.getresponse()
                answer = r.read()
                c.close()
            except OSError as e:
                log(f"post {j}: {e}; retrying")
                time.sleep(0.5)
                continue
            if r.status == 200:
                break
            log(f"post {j}: {r.status} {answer[:200]!r}; retrying")
            time.sleep(0.5)
        else:
            raise RuntimeError(f"post {j} failed")
        done = time.time()
        with lock:
            for a in g["alerts"]:
                sent.append({"fingerprint": a["fingerprint"], "posted": at, "answered": done})

    with cf.ThreadPoolExecutor(16) as pool:
        list(pool.map(send, range(n)))
    first = min(s["posted"] for s in sent)
    last = max(s["posted"] for s in sent)
    slowest = max(s["answered"] - s["posted"] for s in sent)
    with open(os.path.join(out, "posted.json"), "w") as f:
        json.dump(sent, f)
    log(f"posted {len(sent)} alerts in {n} groups over {last - first:.1f} s "
        f"(slowest answer {slowest:.2f} s)")


# ---------------------------------------------------------------------------------------------
# The figures.


def parse_at(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def percentile(sorted_values, p):
    """Nearest rank."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(-(-p * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


def daemon_rss_mib():
    try:
        with open(f"/proc/{os.environ['DAEMON_PID']}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) // 1024
    except (KeyError, OSError, ValueError):
        pass
    return None


def store(db):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    c.execute("PRAGMA busy_timeout = 30000")
    return c


def report(out):
    db = os.environ["STORE_DB"]
    timeout = float(os.environ.get("STORM_TIMEOUT", "900"))
    with open(os.path.join(out, "posted.json")) as f:
        posted = {p["fingerprint"]: p for p in json.load(f)}
    n = len(posted)
    first_post = min(p["posted"] for p in posted.values())
    deadline = first_post + timeout
    last_note = 0.0
    series = []  # [seconds since the first post, decided, the daemon's RSS in MiB]
    while True:
        c = store(db)
        rows = c.execute("SELECT phase, count(*) FROM remediation_requests GROUP BY phase").fetchall()
        signals = c.execute("SELECT count(*) FROM signals").fetchone()[0]
        c.close()
        phases = dict(rows)
        total = sum(phases.values())
        decided = sum(v for k, v in phases.items() if k in DECIDED)
        ended = decided + phases.get("Failed", 0)
        if time.time() - last_note >= 10:
            rss = daemon_rss_mib()
            series.append([round(time.time() - first_post, 1), decided, rss])
            log(f"{decided}/{total} decided after {time.time() - first_post:.0f} s, daemon RSS "
                f"{rss} MiB ({', '.join(f'{k} {v}' for k, v in sorted(phases.items()))})")
            last_note = time.time()
        # Every alert in the store, and every request it opened decided (or failed).
        if signals >= n and ended >= total:
            break
        if time.time() > deadline:
            log(f"timed out after {timeout:.0f} s: reporting what was decided")
            break
        time.sleep(0.5)

    c = store(db)
    signal_of = dict(c.execute("SELECT fingerprint, request_id FROM signals").fetchall())
    decided_at = {}
    for rid, at, payload in c.execute(
            "SELECT request_id, at, payload FROM audit_events WHERE kind = 'transition' ORDER BY id"):
        to = json.loads(payload).get("to")
        if to in DECIDED and rid not in decided_at:
            decided_at[rid] = parse_at(at)
    final = c.execute("SELECT id, phase, reason FROM remediation_requests").fetchall()
    targets = c.execute(
        "SELECT target_namespace, target_name, target_kind, phase FROM remediation_requests").fetchall()
    c.close()
    with open(os.path.join(out, "plan.json")) as f:
        cls_of = {(w["namespace"], w["deployment"]): w["class"] for w in json.load(f)}
    by_class = {}
    for ns, name, kind, phase in targets:
        # A pod is named <deployment>-<pod-template-hash>-<suffix>.
        owner = name.rsplit("-", 2)[0] if kind == "Pod" and name else name
        cls = "node alert" if kind == "Node" else cls_of.get((ns, owner), f"{kind} (not staged)")
        by_class.setdefault(cls, {})
        by_class[cls][phase] = by_class[cls].get(phase, 0) + 1

    latencies = []
    for fp, p in posted.items():
        rid = signal_of.get(fp)
        if rid in decided_at:
            latencies.append(decided_at[rid] - p["posted"])
    latencies.sort()
    last_decision = max(decided_at.values()) if decided_at else first_post
    figures = {
        "alerts": n,
        "requests": len(final),
        "decided": len(latencies),
        "wall_seconds": round(last_decision - first_post, 1),
        "p50": round(percentile(latencies, 50), 1),
        "p99": round(percentile(latencies, 99), 1),
        "slowest": round(latencies[-1], 1) if latencies else float("nan"),
        "phases": {},
        "reasons": {},
        "by_class": by_class,
        "rss_series": series,
    }
    for _, phase, reason in final:
        figures["phases"][phase] = figures["phases"].get(phase, 0) + 1
        if phase in ("ManualReviewRequired", "Failed", "Blocked", "NoActionRequired") and reason:
            short = reason if len(reason) <= 110 else reason[:107] + "..."
            key = f"{phase}: {short}"
            figures["reasons"][key] = figures["reasons"].get(key, 0) + 1
    with open(os.path.join(out, "figures.json"), "w") as f:
        json.dump(figures, f, indent=1)
    print(json.dumps(figures))


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "kubelet":
        kubelet(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
    elif cmd == "stage":
        stage(sys.argv[2])
    elif cmd == "counters":
        print(json.dumps(counters()))
    elif cmd == "post":
        post(sys.argv[2])
    elif cmd == "report":
        report(sys.argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
