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

{{/* The namespaces whose objects the operator reads and writes: the watched ones, or none (cluster-wide). */}}
{{- define "webapp-operator.namespaced" -}}
{{- if .Values.watchNamespaces }}true{{ end -}}
{{- end -}}

{{/* The ServiceAccount as a subject of a binding. */}}
{{- define "webapp-operator.subject" -}}
- kind: ServiceAccount
  name: {{ include "webapp-operator.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}
