{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "evoharness.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified name. */}}
{{- define "evoharness.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "evoharness.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "evoharness.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: evoharness
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "generation"). */}}
{{- define "evoharness.selectorLabels" -}}
app.kubernetes.io/name: {{ include "evoharness.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "evoharness.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "evoharness.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "evoharness.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* In-cluster gRPC address of a component: (dict "root" $ "component" "registry"). */}}
{{- define "evoharness.address" -}}
{{- $c := index .root.Values.components .component -}}
{{- printf "%s-%s.%s.svc.cluster.local:%d" (include "evoharness.fullname" .root) .component .root.Release.Namespace (int $c.port) -}}
{{- end -}}

{{/* Secret-backed environment shared by the components (S3 keys, optional bearer token). */}}
{{- define "evoharness.secretEnv" -}}
- name: EVOHARNESS_S3__ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.s3.existingSecret }}
      key: {{ .Values.s3.accessKeyKey }}
- name: EVOHARNESS_S3__SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.s3.existingSecret }}
      key: {{ .Values.s3.secretKeyKey }}
{{- if .Values.auth.existingSecret }}
- name: EVOHARNESS_SERVER__AUTH_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.auth.existingSecret }}
      key: {{ .Values.auth.tokenKey }}
- name: EVOHARNESS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.auth.existingSecret }}
      key: {{ .Values.auth.tokenKey }}
{{- end }}
{{- end -}}

{{/* The settings every service shares: server (bind all interfaces) and s3. */}}
{{- define "evoharness.baseConfig" -}}
{{- $root := .root -}}
{{- $s3 := dict "endpoint" $root.Values.s3.endpoint "secure" $root.Values.s3.secure "bucket" $root.Values.s3.bucket "region" $root.Values.s3.region -}}
{{- $server := dict "host" "0.0.0.0" "port" (int .port) "metrics_host" "0.0.0.0" "metrics_port" (int .metricsPort) -}}
{{- toYaml (dict "server" $server "s3" $s3) -}}
{{- end -}}

{{/* Writable scratch for a read-only root filesystem, and the settings. */}}
{{- define "evoharness.volumes" -}}
- name: config
  configMap:
    name: {{ include "evoharness.fullname" . }}-config
- name: tmp
  emptyDir: {sizeLimit: 1Gi}
{{- end -}}
