{{- define "ftspark.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ftspark.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ftspark.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ftspark.serviceAccountName" -}}
{{- default (include "ftspark.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* What the operator does with jobs, their drivers and their HA records. It also grants the drivers their
     Role (ftspark-driver), so it holds every permission in that Role (Kubernetes forbids granting more). */}}
{{- define "ftspark.jobRules" -}}
- apiGroups: [ftspark.io]
  resources: [faulttolerantsparkjobs]
  verbs: [get, list, watch]
- apiGroups: [ftspark.io]
  resources: [faulttolerantsparkjobs/status]
  verbs: [get, patch, update]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [list, create, delete]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, create, update, delete]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, create]
# Each attempt's Spark RPC Secret and NetworkPolicy: created with it, deleted with it; never read.
- apiGroups: [""]
  resources: [secrets]
  verbs: [create, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [create, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}
