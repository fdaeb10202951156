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

{{/* The namespaces the operator manages, as JSON: those listed (required in namespaced mode), [] (all) in
     cluster-wide mode; never kube-system, never its own: there the drivers' Role would reach the operator's
     Lease, results and ServiceAccount. */}}
{{- define "ftspark.watchNamespaces" -}}
{{- $namespaces := .Values.watchNamespaces -}}
{{- if and (not $namespaces) (not .Values.rbac.clusterWide) -}}
{{- fail (printf "watchNamespaces: list the namespaces whose jobs this operator manages (not its own, %s), or set rbac.clusterWide=true" .Release.Namespace) -}}
{{- end -}}
{{- if has "kube-system" $namespaces -}}
{{- fail "watchNamespaces: the operator never manages kube-system" -}}
{{- end -}}
{{- if has .Release.Namespace $namespaces -}}
{{- fail (printf "watchNamespaces: the operator never manages its own namespace %s (its Lease, results and keys live there): run jobs in another namespace" .Release.Namespace) -}}
{{- end -}}
{{- toJson $namespaces -}}
{{- end -}}

{{- define "ftspark.serviceAccountName" -}}
{{- default (include "ftspark.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* What the operator does with jobs, their drivers and their HA records. It also grants the drivers their
     Role (ftspark-driver), so it holds every permission in that Role (Kubernetes forbids granting more). It
     reads the jobs' namespaces for their allow.ftspark.io/* labels: in namespaced mode a Role grants that for
     its own namespace only. */}}
{{- define "ftspark.jobRules" -}}
# create: a ScheduledSparkJob's runs; delete: a finished job past its ttlSecondsAfterFinished, a run beyond
# its schedule's history.
- apiGroups: [ftspark.io]
  resources: [faulttolerantsparkjobs]
  verbs: [get, list, watch, create, delete]
- apiGroups: [ftspark.io]
  resources: [faulttolerantsparkjobs/status]
  verbs: [get, patch, update]
- apiGroups: [ftspark.io]
  resources: [scheduledsparkjobs]
  verbs: [get, list, watch]
- apiGroups: [ftspark.io]
  resources: [scheduledsparkjobs/status]
  verbs: [get, patch, update]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, delete]
# The end of an ended driver's log, kept in the job's <job>-driver-logs ConfigMap before its pod is deleted.
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, create]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get]
# Per job or attempt, never read: localRecovery's key for its node-local copies, and each attempt's Spark RPC
# Secret and NetworkPolicy (created and deleted with the attempt).
- apiGroups: [""]
  resources: [secrets]
  verbs: [create, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [create, delete]
# spec.ui: the Service in front of a job's Spark UI and its Ingress, made once per job, owned by it.
- apiGroups: [""]
  resources: [services]
  verbs: [create]
- apiGroups: [networking.k8s.io]
  resources: [ingresses]
  verbs: [create]
# The drivers' PodDisruptionBudget (jobDefaults.driverDisruptionBudget), made once per namespace of jobs.
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [create]
# localRecovery's claim on the job's local-state volume, made once per job, owned by it (never read).
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [create]
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

{{/* The local-state sweeper's one right: to list the jobs (the uids it must keep). */}}
{{- define "ftspark.sweeperRules" -}}
- apiGroups: [ftspark.io]
  resources: [faulttolerantsparkjobs]
  verbs: [list]
{{- end -}}

{{/* What a pod the drivers or the operator create may hold, for a ValidatingAdmissionPolicy on pod creates:
     the variables (allowed: the job policy's allowances, for the installation and the request's namespace;
     newPod: the request creates a pod; containers: its containers and init containers) and the validations on
     them. Each field is refused unless its allowance is granted, as the job policy (ftspark.domain.policy)
     grants them to a job's podTemplate. dict: "root" the chart's context, "subject" what the pod is called in
     messages ("an executor"). */}}
{{- define "ftspark.podContentVariables" -}}
- name: allowed
  expression: >-
    {{ toJson .root.Values.jobPolicy.allow }} + (has(namespaceObject.metadata.labels) ?
    namespaceObject.metadata.labels.filter(k, k.startsWith('allow.ftspark.io/') &&
    namespaceObject.metadata.labels[k] == 'true').map(k, k.substring(17)) : [])
- name: newPod
  expression: request.resource.resource == 'pods' && request.operation == 'CREATE'
- name: containers
  expression: >-
    variables.newPod ? object.spec.containers +
    (has(object.spec.initContainers) ? object.spec.initContainers : []) : []
{{- end -}}

{{- define "ftspark.podContentValidations" -}}
{{- $subject := .subject -}}
- expression: >-
    !variables.newPod || 'serviceAccount' in variables.allowed ||
    (has(object.spec.serviceAccountName) && object.spec.serviceAccountName == 'ftspark-driver')
  message: {{ $subject }} runs as the ftspark-driver ServiceAccount (allowance serviceAccount)
  reason: Forbidden
- expression: >-
    !variables.newPod ||
    (('hostNetwork' in variables.allowed || !(has(object.spec.hostNetwork) && object.spec.hostNetwork)) &&
    ('hostPID' in variables.allowed || !(has(object.spec.hostPID) && object.spec.hostPID)) &&
    ('hostIPC' in variables.allowed || !(has(object.spec.hostIPC) && object.spec.hostIPC)) &&
    ('nodeName' in variables.allowed || !has(object.spec.nodeName)))
  message: {{ $subject }} shares none of the node's namespaces and is placed by the scheduler (allowances hostNetwork, hostPID, hostIPC, nodeName)
  reason: Forbidden
- expression: >-
    'privileged' in variables.allowed || !variables.containers.exists(c, has(c.securityContext) &&
    has(c.securityContext.privileged) && c.securityContext.privileged)
  message: {{ $subject }} runs no privileged container (allowance privileged)
  reason: Forbidden
- expression: >-
    'capabilities' in variables.allowed || !variables.containers.exists(c, has(c.securityContext) &&
    has(c.securityContext.capabilities) && has(c.securityContext.capabilities.add) &&
    size(c.securityContext.capabilities.add) > 0)
  message: {{ $subject }} adds no capabilities (allowance capabilities)
  reason: Forbidden
- expression: >-
    !variables.newPod || 'hostPath' in variables.allowed || !has(object.spec.volumes) ||
    object.spec.volumes.all(v, !has(v.hostPath))
  message: {{ $subject }} mounts no directory of the node (allowance hostPath; localRecovery's directory is a claim's volume)
  reason: Forbidden
{{- end -}}
