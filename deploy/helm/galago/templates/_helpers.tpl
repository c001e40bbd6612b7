{{- define "galago.labels" -}}
app.kubernetes.io/name: galago
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
{{- define "galago.selector" -}}
app.kubernetes.io/name: galago
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
