{{/* The label kustomize adds to every object of deploy/ (deploy/kustomization.yaml). */}}
{{- define "mpi-operator.partOf" -}}
app.kubernetes.io/part-of: mpijob-operator
{{- end }}

{{/* An image reference from (list IMAGE .Chart), IMAGE a component's {repository, tag, digest}: repository@digest
when digest is set, else repository:tag, the tag the chart's appVersion when unset (a release's images carry it). */}}
{{- define "mpi-operator.image" -}}
{{- $image := index . 0 }}{{ $chart := index . 1 }}
{{- if $image.digest }}{{ $image.repository }}@{{ $image.digest }}
{{- else }}{{ $image.repository }}:{{ $image.tag | default $chart.AppVersion }}{{ end }}
{{- end }}

{{/* The pod template's metadata of COMPONENT (webhook or reconciler): its podLabels under the chart's LABELS (the
selector's, which win), the chart's sidecar.istio.io/inject "false" under its podAnnotations (which win). */}}
{{- define "mpi-operator.podMetadata" -}}
{{- $v := index .root.Values .component -}}
labels:
  {{- merge (deepCopy .labels) ($v.podLabels | default dict) | toYaml | nindent 2 }}
annotations:
  {{- merge (deepCopy ($v.podAnnotations | default dict)) (dict "sidecar.istio.io/inject" "false") | toYaml | nindent 2 }}
{{- end }}

{{/* The pod spec fields every component's values may set: imagePullSecrets, nodeSelector, tolerations, affinity. */}}
{{- define "mpi-operator.podScheduling" -}}
{{- $v := index .root.Values .component -}}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* deploy/'s securityContexts (Pod Security "restricted"), for a release whose values predate
podSecurityContext and containerSecurityContext: `helm upgrade --reuse-values` keeps the values of the chart
version it was installed with, without the newer chart's defaults. values.yaml holds the same (tests/unit/test_chart.py). */}}
{{- define "mpi-operator.defaultSecurityContexts" -}}
podSecurityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  {{- if eq .component "webhook" }}
  fsGroup: 65532
  {{- end }}
  seccompProfile:
    type: RuntimeDefault
containerSecurityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  runAsUser: 65532
  capabilities:
    drop: ["ALL"]
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{/* KEY (podSecurityContext or containerSecurityContext) of COMPONENT as YAML: the value, or deploy/'s when the
release's values have no such key. A field set to null is left out (Helm drops it only where values.yaml has it:
the OpenShift values null the fsGroup of both components). */}}
{{- define "mpi-operator.securityContext" -}}
{{- $v := index .root.Values .component -}}
{{- $context := get (include "mpi-operator.defaultSecurityContexts" . | fromYaml) .key -}}
{{- if hasKey $v .key }}{{ $context = get $v .key }}{{ end -}}
{{- $set := dict -}}
{{- range $field, $value := $context }}{{ if not (kindIs "invalid" $value) }}{{ $_ := set $set $field $value }}{{ end }}{{ end -}}
{{- with $set }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* COMPONENT's container env (extraEnv), when set. */}}
{{- define "mpi-operator.env" -}}
{{- with (index .root.Values .component).extraEnv }}
env:
  {{- toYaml . | nindent 2 }}
{{- end }}
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

{{/* The webhook's container arguments: those of deploy/, then each flag that is set. */}}
{{- define "mpi-operator.webhookArgs" -}}
{{- $w := .Values.webhook -}}
- --port
- "9443"
- --tls-cert-file
- /tls/tls.crt
- --tls-key-file
- /tls/tls.key
{{- with .Values.reconciler.clusterDomain }}
- --cluster-domain={{ . }}
{{- end }}
{{- with $w.logLevel }}
- --log-level={{ . }}
{{- end }}
{{- with $w.logFormat }}
- --log-format={{ . }}
{{- end }}
{{- range $w.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
