{{- define "orchard.name" -}}{{ .Chart.Name }}{{- end -}}
{{- define "orchard.fullname" -}}{{ printf "%s" .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "orchard.labels" -}}
app.kubernetes.io/name: {{ include "orchard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
{{- define "orchard.selector" -}}
app.kubernetes.io/name: {{ include "orchard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
