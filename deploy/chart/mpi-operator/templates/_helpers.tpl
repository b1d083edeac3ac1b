{{/* The label kustomize adds to every object of deploy/ (deploy/kustomization.yaml). */}}
{{- define "mpi-operator.partOf" -}}
app.kubernetes.io/part-of: mpijob-operator
{{- end }}

{{/* An image reference from {repository, tag}. */}}
{{- define "mpi-operator.image" -}}
{{ .repository }}:{{ .tag }}
{{- end }}

{{/* certificates.mode with the deprecated aliases resolved: cert-manager, managed (alias reconciler) or manual (alias
builtIn). Every template decides on this, so an alias renders exactly the objects of its new name. */}}
{{- define "mpi-operator.certMode" -}}
{{- $mode := .Values.certificates.mode -}}
{{- get (dict "builtIn" "manual" "reconciler" "managed") $mode | default $mode -}}
{{- end }}

{{/* The manual mode's values as YAML (use with fromYaml): certificates.manual.<key>, or the deprecated
certificates.builtIn.<key> where the former is empty. */}}
{{- define "mpi-operator.manualCertificates" -}}
{{- $new := .Values.certificates.manual | default dict -}}
{{- $old := .Values.certificates.builtIn | default dict -}}
{{- range $key := list "caBundle" "tlsCrt" "tlsKey" }}
{{ $key }}: {{ get $new $key | default (get $old $key) | default "" | toJson }}
{{- end }}
{{- end }}

{{/* The webhook configurations' certificate: cert-manager's injection annotation, or nothing. */}}
{{- define "mpi-operator.injectCA" -}}
{{- if eq .Values.certificates.mode "cert-manager" }}
  annotations:
    cert-manager.io/inject-ca-from: mpi-operator/mpijob-webhook
{{- end }}
{{- end }}

{{/* A webhook's clientConfig for PATH, with the manual mode's caBundle when that mode is chosen. */}}
{{- define "mpi-operator.clientConfig" -}}
clientConfig:
  service:
    name: mpijob-webhook
    namespace: mpi-operator
    path: {{ .path }}
    port: 443
  {{- if eq (include "mpi-operator.certMode" .root) "manual" }}
  caBundle: {{ (include "mpi-operator.manualCertificates" .root | fromYaml).caBundle | trim | quote }}
  {{- end }}
{{- end }}

{{/* The reconciler's container arguments: those of deploy/ first, then each flag that is set. */}}
{{- define "mpi-operator.reconcilerArgs" -}}
{{- $r := .Values.reconciler -}}
- --lock-namespace={{ $r.lockNamespace }}
- --monitoring-port={{ $r.monitoringPort }}
{{- if eq (include "mpi-operator.certMode" .) "managed" }}
{{- $c := .Values.certificates.reconciler }}
- --manage-webhook-certificates=true
- --webhook-cert-duration={{ $c.certDuration }}
- --webhook-cert-renew-before={{ $c.certRenewBefore }}
- --webhook-ca-duration={{ $c.caDuration }}
- --webhook-ca-renew-before={{ $c.caRenewBefore }}
{{- end }}
{{- with $r.namespace }}
- --namespace={{ . }}
{{- end }}
{{- with $r.clusterDomain }}
- --cluster-domain={{ . }}
{{- end }}
{{- with $r.gangScheduling }}
- --gang-scheduling={{ . }}
{{- end }}
{{- if not (kindIs "invalid" $r.threadiness) }}
- --threadiness={{ $r.threadiness }}
{{- end }}
{{- if not (kindIs "invalid" $r.kubeApiQPS) }}
- --kube-api-qps={{ $r.kubeApiQPS }}
{{- end }}
{{- if not (kindIs "invalid" $r.kubeApiBurst) }}
- --kube-api-burst={{ $r.kubeApiBurst }}
{{- end }}
{{- with $r.logLevel }}
- --log-level={{ . }}
{{- end }}
{{- with $r.logFormat }}
- --log-format={{ . }}
{{- end }}
{{- range $r.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
