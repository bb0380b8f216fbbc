# kubemedic approval policy: may a selected remediation run without a human?
#
# kubemedic evaluates `data.kubemedic.approval.decision` once per remediation, in-process with
# regorus; `scripts/opa-crosscheck` checks that OPA agrees on every case in tests/.
#
# input (kubemedic's GateInput):
#   environment              "production", "staging", ... (namespace label, enrichment policy,
#                            or the configured default)
#   severity                 the alert's severity
#   confidence               the selected workflow's confidence, 0-1
#   confidence_threshold     the configured threshold (default 0.8)
#   remediation_target       {kind, name, namespace}: the verified root owner; absent if none
#   action_type, workflow_id the selected workflow
#   detected_labels          {gitOpsManaged, helmManaged, pdbProtected, hpaEnabled, stateful, ...}
#   failed_detections        detections that could not be made (their labels are unknown)
#   warnings                 investigation warnings (regressions, declining effectiveness, ...)
#   business_classification  {business_unit, priority, risk_tolerance}
#   signal_mode              "reactive" or "proactive"
#   proof                    {verdict, holds, failed}: the action's obligations checked against
#                            the cluster ("proven"; "unverified" for an action type kubemedic
#                            knows no obligations for; "refuted" never reaches the gate)
#
# output: decision = {require_approval, risk_factors, reason}
#   Every risk factor is a reason to ask a human, scored 0-100; the highest-scoring one is the
#   reason approvers see. No risk factor: auto-approved.
#
# If this policy fails to load or evaluate, kubemedic requires approval for everything and
# reports the policy as degraded (/readyz, kubemedic_gate_degraded).
package kubemedic.approval

# Environments that may be remediated without a human. Anything else - including a missing or
# unknown environment - counts as production.
non_production_environments := {"development", "dev", "staging", "qa", "test", "sandbox"}

# Kinds whose remediation in production carries more risk (node drains, stateful data).
sensitive_kinds := {"Node", "StatefulSet"}

default environment := ""

environment := lower(input.environment) if is_string(input.environment)

default is_production := true

is_production := false if environment in non_production_environments

# A target the investigation verified: a kind and a name.
default has_target := false

has_target if {
	is_string(input.remediation_target.kind)
	input.remediation_target.kind != ""
	is_string(input.remediation_target.name)
	input.remediation_target.name != ""
}

default is_sensitive_kind := false

is_sensitive_kind if {
	has_target
	input.remediation_target.kind in sensitive_kinds
}

default confidence_threshold := 0.8

confidence_threshold := input.confidence_threshold if is_number(input.confidence_threshold)

# Not used by the default rules (as upstream): there for custom rules such as "require approval
# below the threshold even in staging".
default is_high_confidence := false

is_high_confidence if {
	is_number(input.confidence)
	input.confidence >= confidence_threshold
}

failed_detections contains d if some d in input.failed_detections

failed_detections contains d if some d in input.detected_labels.failedDetections

warnings contains w if some w in input.warnings

environment_name := input.environment if {
	is_string(input.environment)
	input.environment != ""
}

default environment_name := "unknown"

target_text := sprintf("%s %s", [input.remediation_target.kind, input.remediation_target.name]) if has_target

# The action's obligations all hold against the cluster.
default is_proven := false

is_proven if input.proof.verdict == "proven"

proof_verdict := input.proof.verdict if is_string(input.proof.verdict)

default proof_verdict := "absent"

# 85: the action is not proven right and safe (a custom action type has no known obligations;
# no proof at all is the same). Always needs a human, in any environment.
risk_factors contains {
	"score": 85,
	"reason": sprintf("%s is not proven against the cluster (proof %s): a human must judge it", [action_text, proof_verdict]),
} if {
	has_target
	not is_proven
}

action_text := input.action_type if is_string(input.action_type)

default action_text := "the action"

# 90: nothing verified to act on. Always needs a human, in any environment.
risk_factors contains {
	"score": 90,
	"reason": "no remediation target: the investigation did not verify a resource to act on",
} if not has_target

# 80: a sensitive kind in production.
risk_factors contains {
	"score": 80,
	"reason": sprintf("%s in %s: sensitive resource kind", [target_text, environment_name]),
} if {
	is_production
	is_sensitive_kind
}

# 75: infrastructure facts the policy and the workflow rely on are unknown.
risk_factors contains {
	"score": 75,
	"reason": sprintf("%s environment with failed detections (%s): infrastructure facts are unknown", [environment_name, concat(", ", failed_detections)]),
} if {
	is_production
	count(failed_detections) > 0
}

# 72: the investigation raised warnings (e.g. this remediation did not help last time).
risk_factors contains {
	"score": 72,
	"reason": sprintf("%s environment with investigation warnings: %s", [environment_name, concat("; ", warnings)]),
} if {
	is_production
	count(warnings) > 0
}

# 70: production. Every production remediation needs a human.
risk_factors contains {
	"score": 70,
	"reason": sprintf("%s environment: production remediations require approval", [environment_name]),
} if is_production

require_approval := count(risk_factors) > 0

top_score := max({f.score | some f in risk_factors}) if count(risk_factors) > 0

reason := sort([f.reason | some f in risk_factors; f.score == top_score])[0] if count(risk_factors) > 0

reason := sprintf("auto-approved: %s environment, verified target %s", [environment_name, target_text]) if count(risk_factors) == 0

decision := {
	"require_approval": require_approval,
	"risk_factors": risk_factors,
	"reason": reason,
}

# Undo: a remediation made its target worse (fewer ready pods, more failing pods, or a failure
# none of its pods showed before). May kubemedic restore the spec it recorded before its first
# write? kubemedic evaluates `data.kubemedic.approval.undo` only then, with `input.undo` =
# {worse, ready_before, ready_after, failing_before, failing_after, new_causes}; only `true`
# restores (kubemedic also proves that nobody changed the target since). Either way a person
# takes the request over.
#   Outside production: always.
#   In production: when the remediation cost ready pods; a new failure on pods that were not
#   serving anyway is left to the person.
default undo := false

undo if {
	is_object(input.undo)
	not is_production
}

undo if {
	is_object(input.undo)
	is_production
	input.undo.ready_after < input.undo.ready_before
}
