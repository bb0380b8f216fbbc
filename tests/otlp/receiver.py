"""A small OTLP/HTTP trace receiver for tests/traces.rs.

Accepts POST /v1/traces with an ExportTraceServiceRequest in protobuf (the OpenTelemetry
project's own definitions, the `opentelemetry-proto` package from PyPI), answers with an
ExportTraceServiceResponse, and appends every span as one JSON line to the output file:
trace_id, span_id, parent_span_id (hex; "" for a root), name, kind, status, attributes,
events (name and attributes) and the resource's attributes. Anything else is a 404 or 400.

    python receiver.py OUTPUT_FILE   prints `listening on PORT` once it accepts connections

With `--count` (benches/ingest.rs, benches/gate.rs) it keeps no spans, only counts them: after
every export OUTPUT_FILE is replaced by one JSON object, {"exports": N, "spans": N, "bytes": N,
"by_name": {span name: N}} — cheap enough that the receiver is never what a benchmark measures.

    python receiver.py --count OUTPUT_FILE
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

COUNT = sys.argv[1] == "--count"
OUT = sys.argv[-1]
TOTALS = {"exports": 0, "spans": 0, "bytes": 0, "by_name": {}}
TOTALS_LOCK = threading.Lock()


def count(request, size):
    """Add one export to the totals and rewrite OUT with them (atomically: a reader never sees
    half a file)."""
    with TOTALS_LOCK:
        TOTALS["exports"] += 1
        TOTALS["bytes"] += size
        by_name = TOTALS["by_name"]
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    TOTALS["spans"] += 1
                    by_name[span.name] = by_name.get(span.name, 0) + 1
        tmp = OUT + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(TOTALS, f)
        os.replace(tmp, OUT)


def value_of(v):
    """An AnyValue as plain JSON."""
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind)


def attributes(kvs):
    return {kv.key: value_of(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/v1/traces":
            self.send_error(404, "only /v1/traces")
            return
        if self.headers.get("Content-Type", "") != "application/x-protobuf":
            self.send_error(400, "expected application/x-protobuf")
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as e:
            self.send_error(400, f"not an ExportTraceServiceRequest: {e}")
            return
        if COUNT:
            count(request, len(body))
            self.answer()
            return
        lines = []
        for rs in request.resource_spans:
            resource = attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    lines.append(
                        json.dumps(
                            {
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "name": span.name,
                                "kind": span.kind,
                                "status": span.status.code,
                                "attributes": attributes(span.attributes),
                                "events": [
                                    {"name": e.name, "attributes": attributes(e.attributes)}
                                    for e in span.events
                                ],
                                "resource": resource,
                                "scope": ss.scope.name,
                            }
                        )
                    )
        with open(OUT, "a", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
        self.answer()

    def answer(self):
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
