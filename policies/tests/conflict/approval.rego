# A policy that parses and compiles but fails at evaluation time for some inputs: two complete
# definitions of require_approval with different values (an eval_conflict_error in OPA).
package kubemedic.approval

require_approval := true if input.environment == "production"

require_approval := false if input.remediation_target.kind == "Deployment"

decision := {"require_approval": require_approval, "risk_factors": [], "reason": "conflict"}
