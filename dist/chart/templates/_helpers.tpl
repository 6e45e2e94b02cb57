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

{{- /* The image, by digest when image.digest is set; a tag written as a number (1.10)
is read by YAML as one (1.1): quote it. */}}
{{- define "lockedcron.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository (toString .Values.image.digest) }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (toString (default .Chart.AppVersion .Values.image.tag)) }}
{{- end }}
{{- end }}

{{- /* Values that would install something other than what they say, refused with the fix. */}}
{{- define "lockedcron.validate" -}}
{{- if not (kindIs "slice" (default (list) .Values.watchNamespaces)) }}
{{- fail "watchNamespaces must be a list of namespaces: --set 'watchNamespaces={team-a,team-b}', or a YAML list" }}
{{- end }}
{{- if not (kindIs "slice" (default (list) .Values.redisAllowedHosts)) }}
{{- fail "redisAllowedHosts must be a list: --set 'redisAllowedHosts={redis.internal,10.0.0.0/8}', or a YAML list" }}
{{- end }}
{{- if kindIs "float64" .Values.image.tag }}
{{- fail (printf "image.tag %v is a number in the values (YAML reads 1.10 as 1.1, 20240101 as 2.0240101e+07): quote it, tag: \"1.10\"" .Values.image.tag) }}
{{- end }}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicas) 1) }}
{{- fail "replicas above 1 need leaderElection.enabled: without it every manager acts, and each occurrence would get a pod from each; set replicas: 1 or enable leader election" }}
{{- end }}
{{- end }}
