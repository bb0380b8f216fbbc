{{- define "kubemedic.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubemedic.selectorLabels" -}}
app.kubernetes.io/name: kubemedic
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kubemedic.labels" -}}
{{ include "kubemedic.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "kubemedic.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "kubemedic.fullname" .) -}}
{{- end -}}

{{/* The webhook and API tokens of the chart's own Secret: the value given, else the one the
Secret already holds (an upgrade keeps them: Alertmanager and people hold copies), else a fresh
random one (the first install). `lookup` reads the cluster only in `helm install`/`upgrade`
(and `--dry-run=server`); `helm template` and a client dry run see no Secret and print fresh
tokens each time. Rendered as YAML, read back with fromYaml. */}}
{{- define "kubemedic.tokens" -}}
{{- $v := .Values.secrets.values -}}
{{- $old := dict -}}
{{- with lookup "v1" "Secret" .Release.Namespace (include "kubemedic.fullname" .) -}}
{{- $old = .data | default dict -}}
{{- end -}}
webhook: {{ $v.webhookToken | default (get $old "webhook-token" | b64dec) | default (randAlphaNum 40) | quote }}
api: {{ $v.apiToken | default (get $old "api-token" | b64dec) | default (randAlphaNum 40) | quote }}
{{- end -}}

{{/* Rendering-time checks: settings that cannot work are refused before anything is applied. */}}
{{- define "kubemedic.validate" -}}
{{- if and (eq .Values.database.type "sqlite") (gt (int .Values.replicaCount) 1) -}}
{{- fail (printf "replicaCount is %d but database.type is sqlite: an SQLite file has one writer, so kubemedic runs one replica on SQLite. Set replicaCount: 1, or database.type: postgres (with database-url in the Secret) for more replicas." (int .Values.replicaCount)) -}}
{{- end -}}
{{- if not .Values.secrets.existingSecret -}}
{{- $v := .Values.secrets.values -}}
{{- if and (eq .Values.database.type "postgres") (not $v.databaseUrl) -}}
{{- fail "database.type is postgres: set secrets.values.databaseUrl (or secrets.existingSecret with key database-url)" -}}
{{- end -}}
{{- if and (eq .Values.database.type "postgres") (not $v.auditKey) -}}
{{- fail "database.type is postgres: set secrets.values.auditKey (64+ hex digits; every replica must sign the audit chain with the same key), or secrets.existingSecret with key audit-key" -}}
{{- end -}}
{{- if and (ne .Values.llm.provider "offline") (not $v.llmApiKey) -}}
{{- fail (printf "llm.provider is %s: set secrets.values.llmApiKey (or secrets.existingSecret with key llm-api-key)" .Values.llm.provider) -}}
{{- end -}}
{{- if and .Values.smtp.username (not $v.smtpPassword) -}}
{{- fail "smtp.username is set: set secrets.values.smtpPassword (or secrets.existingSecret with key smtp-password)" -}}
{{- end -}}
{{- end -}}
{{- if and (or .Values.config.approvers .Values.config.slackApprovers) (not .Values.config.publicUrl) -}}
{{- fail "approvers are configured: set config.publicUrl, the base of the approval links" -}}
{{- end -}}
{{- end -}}

{{/* An env entry from the Secret. */}}
{{- define "kubemedic.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: {{ .key }}
      {{- if .optional }}
      optional: true
      {{- end }}
{{- end -}}
