{{/* Names and labels shared by every template. */}}

{{- define "gqp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the release name when it already contains the chart name. */}}
{{- define "gqp.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gqp.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels. Deliberately not app.kubernetes.io/managed-by=gpu-quota-portal: that
label marks what the portal's reconciler owns and may prune (Helm's is "Helm").
*/}}
{{- define "gqp.labels" -}}
helm.sh/chart: {{ include "gqp.chart" . }}
{{ include "gqp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gqp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gqp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gqp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gqp.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gqp.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "gqp.secretName" -}}
{{- default (printf "%s-env" (include "gqp.fullname" .)) .Values.secrets.existingSecret }}
{{- end }}

{{/* The settings ConfigMap's data (also copied into the migration hook's ConfigMap). */}}
{{- define "gqp.settingsData" -}}
DEBUG: "false"
ALLOWED_HOSTS: {{ join "," .Values.settings.allowedHosts | quote }}
CSRF_TRUSTED_ORIGINS: {{ join "," .Values.settings.csrfTrustedOrigins | quote }}
SCHEDULER_BACKEND: {{ .Values.settings.schedulerBackend | quote }}
SECURE_SSL_REDIRECT: {{ .Values.settings.secureSslRedirect | toString | quote }}
PROMETHEUS_URL: {{ .Values.settings.prometheusUrl | quote }}
DCGM_EXPORTER_URL: {{ .Values.settings.dcgmExporterUrl | quote }}
KUBE_CONNECT_TIMEOUT: {{ .Values.settings.kubeConnectTimeout | toString | quote }}
KUBE_REQUEST_TIMEOUT: {{ .Values.settings.kubeRequestTimeout | toString | quote }}
{{- if .Values.kubeconfig.secretName }}
KUBECONFIG: {{ printf "/etc/portal/kubeconfig/%s" .Values.kubeconfig.key | quote }}
KUBE_CONTEXT: {{ .Values.kubeconfig.context | quote }}
{{- else }}
KUBECONFIG: ""
KUBE_CONTEXT: ""
{{- end }}
LOG_FORMAT: {{ .Values.settings.logFormat | quote }}
LOG_LEVEL: {{ .Values.settings.logLevel | quote }}
TIME_ZONE: {{ .Values.settings.timeZone | quote }}
DEFAULT_FROM_EMAIL: {{ .Values.settings.email.from | quote }}
EMAIL_HOST: {{ .Values.settings.email.host | quote }}
EMAIL_PORT: {{ .Values.settings.email.port | toString | quote }}
HOME: /tmp
PORTAL_VAR_DIR: /tmp/var
{{- range $name, $value := .Values.settings.extra }}
{{ $name }}: {{ $value | toString | quote }}
{{- end }}
{{- end }}

{{/*
The chart-made Secret's stringData. SECRET_KEY: the value given, else the one already
installed (kept on upgrades), else a new random one.
*/}}
{{- define "gqp.secretData" -}}
{{- $key := .Values.secrets.secretKey }}
{{- if not $key }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (printf "%s-env" (include "gqp.fullname" .)) }}
{{- if and $existing $existing.data (hasKey $existing.data "SECRET_KEY") }}
{{- $key = index $existing.data "SECRET_KEY" | b64dec }}
{{- else }}
{{- $key = randAlphaNum 50 }}
{{- end }}
{{- end -}}
SECRET_KEY: {{ $key | quote }}
DATABASE_URL: {{ required "secrets.databaseUrl is required (or set secrets.existingSecret)" .Values.secrets.databaseUrl | quote }}
REDIS_URL: {{ required "secrets.redisUrl is required (or set secrets.existingSecret)" .Values.secrets.redisUrl | quote }}
METRICS_TOKEN: {{ .Values.secrets.metricsToken | quote }}
{{- range $name, $value := .Values.secrets.extra }}
{{ $name }}: {{ $value | toString | quote }}
{{- end }}
{{- end }}

{{/* Pod-level fields every workload shares. */}}
{{- define "gqp.podCommon" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The environment of every portal container: settings ConfigMap and Secret. */}}
{{- define "gqp.envFrom" -}}
envFrom:
  - configMapRef:
      name: {{ include "gqp.fullname" . }}-settings
  - secretRef:
      name: {{ include "gqp.secretName" . }}
{{- end }}

{{/* /tmp (read-only root filesystem) and the optional kubeconfig: volumes and mounts. */}}
{{- define "gqp.volumes" -}}
volumes:
  - name: tmp
    emptyDir: {}
{{- if and .kube .root.Values.kubeconfig.secretName }}
  - name: kubeconfig
    secret:
      secretName: {{ .root.Values.kubeconfig.secretName }}
      defaultMode: 0440
{{- end }}
{{- end }}

{{- define "gqp.volumeMounts" -}}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- if and .kube .root.Values.kubeconfig.secretName }}
  - name: kubeconfig
    mountPath: /etc/portal/kubeconfig
    readOnly: true
{{- end }}
{{- end }}

{{/* Host header of the /healthz probes: Django answers only its ALLOWED_HOSTS. */}}
{{- define "gqp.probeHost" -}}
{{- $host := first .Values.settings.allowedHosts | default "localhost" }}
{{- if hasPrefix "." $host }}{{ printf "probe%s" $host }}{{ else if eq $host "*" }}localhost{{ else }}{{ $host }}{{ end }}
{{- end }}
