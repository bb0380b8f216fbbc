"""Cross-check kubemedic's regorus gate against real OPA.

Usage: crosscheck.py REPORT.json   (the output of `kubemedic policy test --format json`)

For every case of the report: load the case's policy directory into OPA exactly as kubemedic loads
it (every *.rego file directly in the directory, sorted by name), evaluate
data.kubemedic.approval.decision and data.kubemedic.approval with the case's input (the input
regorus saw, as kubemedic serialised it), and compare with what regorus answered:

- degraded (failed to load or evaluate, or an undefined / malformed decision) on both sides, or
  on neither;
- if not degraded: require_approval, reason, risk factors (as a set) and the value of every rule
  of the package (sets compared as sets, numbers by value);
- the case's `want`, checked against OPA's answer, so every case passes in OPA too.

Prints one line per case and the disagreements; exit status 1 if there is any.
Only the standard library and opa_bindings are needed.
"""

import json
import os
import re
import sys

from opa_bindings import OpaEngine, OpaError, OpaUndefinedError

DECISION = "kubemedic.approval.decision"
PACKAGE = "kubemedic.approval"


def opa_version():
    """The OPA module version embedded in the bindings' Go library (from its build info)."""
    import opa_bindings

    lib = os.path.join(os.path.dirname(opa_bindings.__file__), "libopabridge.so")
    try:
        with open(lib, "rb") as f:
            m = re.search(rb"github\.com/open-policy-agent/opa\s+(v\d+\.\d+\.\d+)", f.read())
        return m.group(1).decode() if m else "unknown"
    except OSError:
        return "unknown"


class Degraded(Exception):
    pass


def load(policy_dir):
    try:
        names = sorted(
            n
            for n in os.listdir(policy_dir)
            if n.endswith(".rego")
            and not n.startswith(".")
            and os.path.isfile(os.path.join(policy_dir, n))
        )
    except OSError as e:
        raise Degraded(f"cannot read {policy_dir}: {e}")
    if not names:
        raise Degraded(f"no *.rego files in {policy_dir}")
    engine = OpaEngine()
    for n in names:
        path = os.path.join(policy_dir, n)
        with open(path, encoding="utf-8") as f:
            try:
                engine.add_policy(path, f.read())
            except OpaError as e:
                raise Degraded(str(e))
    return engine


def decide(engine, inp):
    """OPA's decision, shaped like kubemedic's GateDecision (minus the revision)."""
    try:
        doc = engine.eval_document(DECISION, inp)
    except OpaUndefinedError:
        raise Degraded(f"data.{DECISION} is undefined for this input")
    except OpaError as e:
        raise Degraded(str(e))
    if not isinstance(doc, dict) or not isinstance(doc.get("require_approval"), bool):
        raise Degraded(f"data.{DECISION} has the wrong shape: {doc!r}")
    factors = []
    for f in doc.get("risk_factors") or []:
        score = f.get("score") if isinstance(f, dict) else None
        if not isinstance(score, (int, float)) or score != int(score):
            raise Degraded(f"risk factor {f!r} has no whole-number score")
        factors.append({"score": int(score), "reason": f.get("reason")})
    factors.sort(key=lambda f: (-f["score"], f["reason"]))
    reason = doc.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        if factors:
            reason = factors[0]["reason"]
        else:
            reason = (
                "approval required by policy"
                if doc["require_approval"]
                else "auto-approved by policy"
            )
    return {
        "require_approval": doc["require_approval"],
        "degraded": False,
        "reason": reason,
        "risk_factors": factors,
    }


def normalize(v):
    """Numbers by value, arrays as sets, objects by key (as `kubemedic policy test` compares)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, list):
        items = [normalize(i) for i in v]
        return sorted(items, key=lambda i: json.dumps(i, sort_keys=True))
    if isinstance(v, dict):
        return {k: normalize(x) for k, x in v.items()}
    return v


def check_want(want, got, rules):
    """The case's expectations against OPA's answer (mirrors kubemedic's policy/cases.rs)."""
    failures = []
    if want.get("degraded", False) != got["degraded"]:
        failures.append(f"degraded: want {want.get('degraded', False)}, got {got['degraded']}")
    if want["require_approval"] != got["require_approval"]:
        failures.append(
            f"require_approval: want {want['require_approval']}, got {got['require_approval']}"
        )
    if "reason" in want and want["reason"] != got["reason"]:
        failures.append(f"reason: want {want['reason']!r}, got {got['reason']!r}")
    if "reason_contains" in want and want["reason_contains"] not in got["reason"]:
        failures.append(f"reason: want it to contain {want['reason_contains']!r}, got {got['reason']!r}")
    if "risk_scores" in want:
        w = sorted(want["risk_scores"], reverse=True)
        g = [f["score"] for f in got["risk_factors"]]
        if w != g:
            failures.append(f"risk_scores: want {w}, got {g}")
    for rule, value in (want.get("rules") or {}).items():
        if rules is None:
            failures.append(f"rule {rule}: the policy is degraded in OPA")
        elif rule not in rules:
            failures.append(f"rule {rule}: want {json.dumps(value)}, got undefined")
        elif normalize(rules[rule]) != normalize(value):
            failures.append(f"rule {rule}: want {json.dumps(value)}, got {json.dumps(rules[rule])}")
    return failures


def compare(case, got, opa_rules):
    """Disagreements between regorus (the report) and OPA."""
    mine = case["decision"]
    out = []
    if mine["degraded"] != got["degraded"]:
        out.append(
            f"degraded: regorus {mine['degraded']} ({mine['reason']}), OPA {got['degraded']} ({got['reason']})"
        )
        return out
    if mine["require_approval"] != got["require_approval"]:
        out.append(f"require_approval: regorus {mine['require_approval']}, OPA {got['require_approval']}")
    if got["degraded"]:
        return out  # both failed closed; their error texts differ by design
    if mine["reason"] != got["reason"]:
        out.append(f"reason: regorus {mine['reason']!r}, OPA {got['reason']!r}")
    mine_factors = [{"score": f["score"], "reason": f["reason"]} for f in mine["risk_factors"]]
    if mine_factors != got["risk_factors"]:
        out.append(f"risk_factors: regorus {mine_factors}, OPA {got['risk_factors']}")
    regorus_rules = case.get("rules") or {}
    opa_rules = opa_rules or {}
    for name in sorted(set(regorus_rules) | set(opa_rules)):
        if name not in regorus_rules:
            out.append(f"rule {name}: regorus undefined, OPA {json.dumps(opa_rules[name])}")
        elif name not in opa_rules:
            out.append(f"rule {name}: regorus {json.dumps(regorus_rules[name])}, OPA undefined")
        elif normalize(regorus_rules[name]) != normalize(opa_rules[name]):
            out.append(
                f"rule {name}: regorus {json.dumps(regorus_rules[name])}, OPA {json.dumps(opa_rules[name])}"
            )
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        report = json.load(f)
    engines = {}
    disagreements = 0
    failures_in_opa = 0
    for case in report["cases"]:
        label = f"{case['file']}: {case['name']}"
        policy_dir = case["policy_dir"]
        if policy_dir not in engines:
            try:
                engines[policy_dir] = load(policy_dir)
            except Degraded as e:
                engines[policy_dir] = e
        engine = engines[policy_dir]
        opa_rules = None
        try:
            if isinstance(engine, Degraded):
                raise engine
            got = decide(engine, case["input"])
            try:
                opa_rules = engine.eval_document(PACKAGE, case["input"])
            except OpaError as e:
                opa_rules = {"<error>": str(e)}
        except Degraded as e:
            got = {
                "require_approval": True,
                "degraded": True,
                "reason": f"approval policy unavailable: {e}",
                "risk_factors": [],
            }
        diffs = compare(case, got, opa_rules)
        want_failures = check_want(case["want"], got, opa_rules)
        if not diffs and not want_failures:
            state = "degraded in both" if got["degraded"] else "agree"
            print(f"AGREE  {label} ({state})")
            continue
        if diffs:
            disagreements += 1
            print(f"DIFFER {label}")
            for d in diffs:
                print(f"         {d}")
        if want_failures:
            failures_in_opa += 1
            print(f"FAIL   {label} (in OPA)")
            for d in want_failures:
                print(f"         {d}")
        print(f"         input: {json.dumps(case['input'], sort_keys=True)}")
    n = len(report["cases"])
    print(
        f"{n} cases, OPA {opa_version()} vs regorus: {disagreements} disagreements, "
        f"{failures_in_opa} cases failing in OPA, {report['failed']} failing in regorus"
    )
    return 1 if disagreements or failures_in_opa or report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
