#!/usr/bin/env bash
# Smoke test for a control plane started by start.sh: uses only curl + python3.
#
# Usage: smoke-test.sh STATE_DIR
#
# Checks: /version is v1.20.2; a Deployment (2 replicas) gets a ReplicaSet and
# 2 Pods with ownerReferences from the controller-manager; the reader and
# nobody tokens get 403 listing pods (no bindings yet); policy/v1beta1 is
# served and policy/v1 is not. Cleans up its namespace.
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: $0 STATE_DIR" >&2; exit 2; }
# shellcheck disable=SC1091
source "$1/env"

SERVER="$KUBEMEDIC_TEST_KUBE_SERVER"
NS="kt-smoke-$(openssl rand -hex 3)"
T0=$SECONDS

api() { # TOKEN METHOD PATH [JSON-BODY] -> prints "HTTP_CODE BODY"
    local token="$1" method="$2" path="$3" body="${4:-}" args=()
    [[ -n "$body" ]] && args=(-H "Content-Type: application/json" --data "$body")
    curl -sS --max-time 10 --cacert "$KUBEMEDIC_TEST_KUBE_CA_FILE" \
        -H "Authorization: Bearer $token" -X "$method" "${args[@]}" \
        -w '\n%{http_code}' "$SERVER$path"
}
code_of() { tail -n1 <<<"$1"; }
body_of() { sed '$d' <<<"$1"; }
# py EXPR JSON : evaluate a python expression over the parsed JSON `d`
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($1)" "$2"; }

ok() { echo "ok   $*"; }
bad() { echo "FAIL $*" >&2; exit 1; }
expect_code() { # WANT RESPONSE WHAT
    local got
    got=$(code_of "$2")
    if [[ "$got" == "$1" ]]; then
        ok "$3 -> $got"
    else
        bad "$3 -> $got (want $1): $(body_of "$2" | head -c 400)"
    fi
}

ADMIN="$KUBEMEDIC_TEST_KUBE_ADMIN_TOKEN"
READER="$KUBEMEDIC_TEST_KUBE_READER_TOKEN"
NOBODY="$KUBEMEDIC_TEST_KUBE_NOBODY_TOKEN"

r=$(api "$ADMIN" GET /version)
expect_code 200 "$r" "GET /version"
ver=$(py 'd["gitVersion"]' "$(body_of "$r")")
[[ "$ver" == v1.20.2 ]] || bad "server version $ver (want v1.20.2)"
ok "server version $ver"

expect_code 200 "$(api "$ADMIN" GET /apis/policy/v1beta1)" "GET /apis/policy/v1beta1"
expect_code 404 "$(api "$ADMIN" GET /apis/policy/v1)" "GET /apis/policy/v1 (not in 1.20)"

expect_code 403 "$(api "$READER" GET /api/v1/pods)" "kubemedic-reader lists pods before any binding"
expect_code 403 "$(api "$NOBODY" GET /api/v1/pods)" "nobody lists pods"
expect_code 401 "$(api "not-a-token" GET /api/v1/pods)" "unknown token lists pods"

expect_code 201 "$(api "$ADMIN" POST /api/v1/namespaces \
    "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$NS\"}}")" "create namespace $NS"

DEPLOY='{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "labels": {"app": "web"}},
  "spec": {
    "replicas": 2,
    "selector": {"matchLabels": {"app": "web"}},
    "template": {
      "metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}
    }
  }
}'
expect_code 201 "$(api "$ADMIN" POST "/apis/apps/v1/namespaces/$NS/deployments" "$DEPLOY")" "create Deployment $NS/web (2 replicas)"

# Wait for Deployment -> ReplicaSet -> 2 Pods, linked by ownerReferences.
deadline=$((SECONDS + 30))
while :; do
    rs=$(body_of "$(api "$ADMIN" GET "/apis/apps/v1/namespaces/$NS/replicasets")")
    pods=$(body_of "$(api "$ADMIN" GET "/api/v1/namespaces/$NS/pods")")
    rs_name=$(py '",".join(i["metadata"]["name"] for i in d["items"] if any(o["kind"]=="Deployment" and o["name"]=="web" and o.get("controller") for o in i["metadata"].get("ownerReferences",[])))' "$rs")
    n_pods=0
    if [[ -n "$rs_name" && "$rs_name" != *,* ]]; then
        n_pods=$(py "sum(1 for i in d['items'] if any(o['kind']=='ReplicaSet' and o['name']=='$rs_name' and o.get('controller') for o in i['metadata'].get('ownerReferences',[])))" "$pods")
    fi
    [[ "$n_pods" == 2 ]] && break
    ((SECONDS < deadline)) || bad "no ReplicaSet + 2 owned Pods after 30 s (rs='$rs_name', pods=$n_pods)"
    sleep 0.5
done
ok "ReplicaSet $rs_name owned by Deployment web; 2 Pods owned by it:"
py '"\n".join("       %s  phase=%s  owner=%s/%s" % (i["metadata"]["name"], i["status"].get("phase"), i["metadata"]["ownerReferences"][0]["kind"], i["metadata"]["ownerReferences"][0]["name"]) for i in d["items"])' "$pods"

expect_code 200 "$(api "$ADMIN" DELETE "/api/v1/namespaces/$NS")" "delete namespace $NS"
echo "smoke test passed in $((SECONDS - T0)) s"
