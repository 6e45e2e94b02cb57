{{- define "lockedcron.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lockedcron.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else if contains (include "lockedcron.name" .) .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "lockedcron.name" .) | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "lockedcron.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lockedcron.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{- define "lockedcron.labels" -}}
{{ include "lockedcron.selectorLabels" . }}
app.kubernetes.io/part-of: lockedcron
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "lockedcron.serviceAccountName" -}}
{{- default (printf "%s-controller-manager" (include "lockedcron.fullname" .)) .Values.serviceAccount.name }}
{{- end }}

{{- define "lockedcron.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
