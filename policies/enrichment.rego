# kubemedic enrichment policy (optional): derive what a namespace's labels do not say.
#
# kubemedic reads kubemedic.io/environment, kubemedic.io/priority, kubemedic.io/business-unit and
# kubemedic.io/risk-tolerance from the target's namespace. For each value the labels do not
# give, it takes this package's rule of the same name (environment, priority, business_unit,
# risk_tolerance) if defined; the environment then falls back to the configured default
# (production). A label always wins over this policy.
#
# input:
#   namespace  {name, found, labels}  the target's namespace (for a Node: the alert's namespace)
#   target     {kind, name, namespace} from the alert
#   signal     {name, severity, mode, labels}
#   labels     what the namespace labels already gave
package kubemedic.enrichment

# Namespace name suffixes and the environment they mean: shop-prod -> production.
environment_suffixes := {
	"-prod": "production",
	"-production": "production",
	"-staging": "staging",
	"-stage": "staging",
	"-qa": "qa",
	"-test": "test",
	"-dev": "development",
}

environment := env if {
	some suffix, env in environment_suffixes
	endswith(input.namespace.name, suffix)
}

# The environment as it will be: the label if there is one, else what this policy derives.
effective_environment := input.labels.environment

effective_environment := environment if not input.labels.environment

# Production namespaces are P1 unless their kubemedic.io/priority label says otherwise.
priority := "P1" if effective_environment == "production"
