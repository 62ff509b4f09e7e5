{{/* The release's name, with the chart's name unless the release already says it (63 characters at most). */}}
{{- define "webapp-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The labels that select the operator's pods: never changed by an upgrade (a Deployment's selector is immutable). */}}
{{- define "webapp-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object of the release. */}}
{{- define "webapp-operator.labels" -}}
{{ include "webapp-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "webapp-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "webapp-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "webapp-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The webhook certificate's Secret: the chart's, or the one named with source secret. */}}
{{- define "webapp-operator.webhookSecretName" -}}
{{- if eq .Values.webhook.certificate.source "secret" -}}
{{- required "webhook.certificate.secretName is required with source secret" .Values.webhook.certificate.secretName -}}
{{- else -}}
{{- include "webapp-operator.fullname" . }}-webhook-cert
{{- end -}}
{{- end -}}

{{/* The ServiceAccount as a subject of a binding. */}}
{{- define "webapp-operator.subject" -}}
- kind: ServiceAccount
  name: {{ include "webapp-operator.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}


{{/* A binding of the operator's ServiceAccount to a Role (namespace set) or a ClusterRole: dict with ctx, name,
namespace (optional). */}}
{{- define "webapp-operator.binding" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ if .namespace }}RoleBinding{{ else }}ClusterRoleBinding{{ end }}
metadata:
  name: {{ .name }}
  {{- with .namespace }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "webapp-operator.labels" .ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: {{ if .namespace }}Role{{ else }}ClusterRole{{ end }}
  name: {{ .name }}
subjects:
{{ include "webapp-operator.subject" .ctx }}
{{- end -}}

{{/* An alert's labels: dict with ctx and severity. */}}
{{- define "webapp-operator.alertLabels" -}}
severity: {{ .severity }}
{{- with .ctx.Values.metrics.prometheusRule.alertLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Values the schema cannot compare: fail with the values' paths. */}}
{{- define "webapp-operator.validate" -}}
{{- $ports := list (int .Values.healthProbe.port) }}
{{- if .Values.metrics.enabled }}{{ $ports = append $ports (int .Values.metrics.port) }}{{ end }}
{{- if .Values.webhook.enabled }}{{ $ports = append $ports (int .Values.webhook.port) }}{{ end }}
{{- if ne (len $ports) (len (uniq $ports)) }}
{{- fail (printf "healthProbe.port, metrics.port and webhook.port must differ: %v" $ports) }}
{{- end }}
{{- range $k, $v := .Values.podLabels }}
{{- if has $k (list "app.kubernetes.io/name" "app.kubernetes.io/instance") }}
{{- fail (printf "podLabels.%s: the chart sets it (it selects the operator's pods)" $k) }}
{{- end }}
{{- end }}
{{- if and .Values.crds.enabled (not .Values.webhook.enabled) }}
{{- fail "crds.enabled needs webhook.enabled: the CRD's conversion is served by the release that installs it" }}
{{- end }}
{{- if and .Values.metrics.prometheusRule.enabled (not .Values.metrics.prometheusRule.job) (not (and .Values.metrics.enabled .Values.metrics.serviceMonitor.enabled)) }}
{{- fail "metrics.prometheusRule.enabled without the chart's ServiceMonitor: set metrics.prometheusRule.job to the job that scrapes the operator" }}
{{- end }}
{{- end -}}
