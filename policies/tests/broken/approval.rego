# A policy that does not parse (an unterminated rule body): kubemedic must fail closed.
package kubemedic.approval

decision := {"require_approval": false, "risk_factors": [], "reason": "always"} if {
	input.environment == "staging"
