"""Time OPA evaluating the approval decision: the OPA half of benches/gate.rs.

Usage: bench.py POLICY_DIR INPUTS.json PASSES

Loads every *.rego file of POLICY_DIR into one OPA engine (the OPA Go library through PyPI
opa-golib-python-bindings), warms up with one pass, then times each eval_document call of
kubemedic.approval.decision for every input, PASSES times. The bindings keep a prepared query
per query string, so this is OPA's prepared-query path plus the crossing: Python JSON encoding,
ctypes, Go JSON decoding and encoding, Python JSON decoding. Prints JSON: samples_us,
require_approval (per input, first pass), json_encode_p50_us, opa_version.
"""

import json
import os
import re
import sys
import time

import opa_bindings
from opa_bindings import OpaEngine

DECISION = "kubemedic.approval.decision"


def opa_version():
    lib = os.path.join(os.path.dirname(opa_bindings.__file__), "libopabridge.so")
    try:
        with open(lib, "rb") as f:
            m = re.search(rb"github\.com/open-policy-agent/opa\s+(v\d+\.\d+\.\d+)", f.read())
        return m.group(1).decode() if m else "unknown"
    except OSError:
        return "unknown"


def main():
    policy_dir, inputs_path, passes = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(inputs_path, encoding="utf-8") as f:
        inputs = json.load(f)
    engine = OpaEngine()
    for name in sorted(os.listdir(policy_dir)):
        path = os.path.join(policy_dir, name)
        if name.endswith(".rego") and os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                engine.add_policy(path, f.read())
    decisions = [engine.eval_document(DECISION, i)["require_approval"] for i in inputs]
    perf = time.perf_counter_ns
    samples = []
    for _ in range(passes):
        for i in inputs:
            t = perf()
            engine.eval_document(DECISION, i)
            samples.append((perf() - t) / 1000.0)
    encode = []
    for i in inputs:
        t = perf()
        json.dumps(i, ensure_ascii=False).encode("utf-8")
        encode.append((perf() - t) / 1000.0)
    encode.sort()
    json.dump(
        {
            "samples_us": samples,
            "require_approval": decisions,
            "json_encode_p50_us": encode[len(encode) // 2],
            "opa_version": opa_version(),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
