{{/* Common labels. */}}
{{- define "cloudstack-ccm.labels" -}}
k8s-app: cloud-controller-manager
app.kubernetes.io/name: cloudstack-ccm
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Selector labels: the Go provider's, so an upgrade in place keeps the Deployment. */}}
{{- define "cloudstack-ccm.selectorLabels" -}}
k8s-app: cloud-controller-manager
{{- end -}}

{{/* The name of the cloud-config Secret. */}}
{{- define "cloudstack-ccm.secretName" -}}
{{- default "cloudstack-secret" .Values.cloudConfig.existingSecret -}}
{{- end -}}

{{/* The image reference. */}}
{{- define "cloudstack-ccm.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
