{{/*
Names, labels and the topology every template shares. The components map (values.components)
is rendered by the named templates below, one entry per service.
*/}}

{{- define "chaos-core.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "chaos-core.fullname" -}}
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

{{/* The component order: what renders, in which order. */}}
{{- define "chaos-core.componentNames" -}}
{{- list "edge" "cognition" "policy" "ledger" "memory" "council" | toJson -}}
{{- end -}}

{{/*
Who calls whom, as the services' config.ts read it: the address variable each caller sets for
each service it reaches (edge: POLICY_ADDR, MEMORY_ADDR, COGNITION_ADDR, COUNCIL_ADDR,
LEDGER_ADDR; cognition: POLICY_ADDR, MEMORY_ADDR, LEDGER_ADDR; ledger: POLICY_ADDR).
*/}}
{{- define "chaos-core.callees" -}}
{{- dict "edge" (list "policy" "memory" "cognition" "council" "ledger") "cognition" (list "policy" "memory" "ledger") "ledger" (list "policy") "policy" (list) "memory" (list) "council" (list) | toJson -}}
{{- end -}}

{{/* The callers of a component (the inverse of callees). Arguments: (list $ "policy"). */}}
{{- define "chaos-core.callers" -}}
{{- $root := index . 0 -}}
{{- $target := index . 1 -}}
{{- $callees := include "chaos-core.callees" $root | fromJson -}}
{{- $out := list -}}
{{- range $caller := include "chaos-core.componentNames" $root | fromJsonArray -}}
{{- if has $target (index $callees $caller) -}}{{- $out = append $out $caller -}}{{- end -}}
{{- end -}}
{{- $out | toJson -}}
{{- end -}}

{{/* Components that keep data in Postgres (and the migrate Job). */}}
{{- define "chaos-core.usesPostgres" -}}
{{- has . (list "policy" "memory" "ledger" "council" "migrate") -}}
{{- end -}}

{{/* Whether cognition calls a remote AI provider (the same inference as its providers/config.ts: explicit provider, else base URL, else API key). */}}
{{- define "chaos-core.remoteProvider" -}}
{{- $c := .Values.config.cognition -}}
{{- if $c.provider -}}{{- if ne $c.provider "heuristic" -}}true{{- end -}}
{{- else if or $c.openaiBaseUrl .Values.secrets.openaiApiKey.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* Components that read REDIS_URL (policy publishes tenant generations there, which every edge replica reads per request). */}}
{{- define "chaos-core.usesRedis" -}}
{{- has . (list "edge" "cognition" "policy" "ledger") -}}
{{- end -}}

{{- define "chaos-core.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "chaos-core.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: chaos-core
{{- end -}}

{{/* Selector labels of one component. Arguments: (list $ "edge"). */}}
{{- define "chaos-core.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "chaos-core.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "chaos-core.componentLabels" -}}
{{ include "chaos-core.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "chaos-core.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "chaos-core.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "chaos-core.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Whether a component can run more than one replica (then callers balance over its headless Service). Arguments: (list $ "cognition"). */}}
{{- define "chaos-core.multi" -}}
{{- $c := index (index . 0).Values.components (index . 1) -}}
{{- if or (gt (int $c.replicas) 1) (and (hasKey $c "hpa") $c.hpa.enabled) -}}true{{- end -}}
{{- end -}}

{{/*
The gRPC address a caller sets for a component: dns:/// over the headless Service (client-side
round robin, docs/operations.md) when it can run several replicas, else the ClusterIP Service.
Fully qualified with a trailing dot: no search-path lookups. Arguments: (list $ "cognition").
*/}}
{{- define "chaos-core.addr" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $port := (index $root.Values.components $name).port -}}
{{- $host := printf "%s-%s" (include "chaos-core.fullname" $root) $name -}}
{{- if include "chaos-core.multi" . -}}
{{- printf "dns:///%s-headless.%s.svc.cluster.local.:%v" $host $root.Release.Namespace $port -}}
{{- else -}}
{{- printf "%s.%s.svc.cluster.local.:%v" $host $root.Release.Namespace $port -}}
{{- end -}}
{{- end -}}

{{/* One env var from a Secret reference. Arguments: (list "NAME" $ref). */}}
{{- define "chaos-core.secretEnv" -}}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ (index . 1).existingSecret }}
      key: {{ (index . 1).key }}
{{- end -}}

{{/*
CHAOS_CORE_SHUTDOWN_GRACE_SECONDS: what is left of terminationGracePeriodSeconds after the preStop
delay and 5 s for the process to exit (the drain then ends before the kubelet's SIGKILL).
*/}}
{{- define "chaos-core.shutdownGrace" -}}
{{- sub (sub (int .Values.lifecycle.terminationGracePeriodSeconds) (int .Values.lifecycle.preStopSeconds)) 5 -}}
{{- end -}}

{{/* The ConfigMap holding the ledger's policy file, when there is one (existing, or the chart's own from config.ledger.policy.document). */}}
{{- define "chaos-core.ledgerPolicy" -}}
{{- $p := .Values.config.ledger.policy -}}
{{- if $p.existingConfigMap -}}{{- $p.existingConfigMap -}}
{{- else if $p.document -}}{{- printf "%s-ledger-policy" (include "chaos-core.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The ConfigMap holding the edge's rate limits file, when there is one (existing, or the chart's own from config.edge.rateLimits.document). */}}
{{- define "chaos-core.rateLimits" -}}
{{- $p := .Values.config.edge.rateLimits -}}
{{- if $p.existingConfigMap -}}{{- $p.existingConfigMap -}}
{{- else if $p.document -}}{{- printf "%s-rate-limits" (include "chaos-core.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
Where cognition finds its upstreams' files (docs/federation.md §9): the ConfigMap's directory
(upstreams.json, upstreams.lock), the Secret's (CHAOS_CORE_UPSTREAM_SECRETS_DIR: the operator's and
the tenants' header references) and the writable emptyDir stdio upstreams run in, as the standalone
runs them in <dataDir>/upstreams/.
*/}}
{{- define "chaos-core.upstreamsDirs" -}}
{{- dict "config" "/etc/chaos-core/upstreams" "secrets" "/etc/chaos-core/upstream-secrets" "work" "/var/lib/chaos-core/upstreams" | toJson -}}
{{- end -}}

{{/* The services' own CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES default (the upstream pool's 1 MiB): without the ConfigMap, only another value is rendered. */}}
{{- define "chaos-core.defaultMaxResultBytes" -}}1048576{{- end -}}

{{/*
CHAOS_CORE_HTTP_ALLOWED_ADDRESSES (cognition and policy): the internal ranges a tenant's upstream and
http.request may reach, comma separated as kit's parseAllowedAddresses reads them; none when empty.
*/}}
{{- define "chaos-core.httpAllowedAddressesEnv" -}}
{{- with .Values.config.httpAllowedAddresses }}
- name: CHAOS_CORE_HTTP_ALLOWED_ADDRESSES
  value: {{ join "," . | quote }}
{{- end }}
{{- end -}}

{{/* Where each Secret file is mounted. */}}
{{- define "chaos-core.secretFiles" -}}
{{- $edge := list (dict "var" "CHAOS_CORE_API_KEYS_FILE" "secret" "apiKeys" "dir" "/etc/chaos-core/api-keys") (dict "var" "CHAOS_CORE_MRTR_KEYS_FILE" "secret" "mrtrKeyring" "dir" "/etc/chaos-core/mrtr") -}}
{{- if and .Values.config.edge.oauth.issuer .Values.config.edge.oauth.introspection.url -}}
{{- $edge = append $edge (dict "var" "CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE" "secret" "oauthIntrospection" "dir" "/etc/chaos-core/oauth") -}}
{{- end -}}
{{- if and .Values.config.edge.oauth.issuer .Values.config.edge.oauth.console.clientId -}}
{{- $edge = append $edge (dict "var" "CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE" "secret" "consoleOauthClient" "dir" "/etc/chaos-core/console-oauth") -}}
{{- end -}}
{{- dict "edge" $edge "ledger" (list (dict "var" "CHAOS_CORE_LEDGER_KEYS_FILE" "secret" "ledgerKeyring" "dir" "/etc/chaos-core/ledger")) | toJson -}}
{{- end -}}

{{/* The environment of one component, exactly the variables its config.ts reads. Arguments: (list $ "edge"). */}}
{{- define "chaos-core.env" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $v := $root.Values -}}
{{- $c := index $v.components $name -}}
- name: HOST
  value: "0.0.0.0"
- name: PORT
  value: {{ $c.port | quote }}
- name: LOG_LEVEL
  value: {{ $v.config.logLevel | quote }}
- name: CHAOS_CORE_SHUTDOWN_GRACE_SECONDS
  value: {{ include "chaos-core.shutdownGrace" $root | quote }}
{{- if $v.grpcTls.enabled }}
- name: CHAOS_CORE_GRPC_TLS_CERT_FILE
  value: {{ printf "/etc/chaos-core/grpc-tls/%s" $v.secrets.grpcTls.certKey | quote }}
- name: CHAOS_CORE_GRPC_TLS_KEY_FILE
  value: {{ printf "/etc/chaos-core/grpc-tls/%s" $v.secrets.grpcTls.keyKey | quote }}
- name: CHAOS_CORE_GRPC_TLS_CA_FILE
  value: {{ printf "/etc/chaos-core/grpc-tls/%s" $v.secrets.grpcTls.caKey | quote }}
- name: CHAOS_CORE_GRPC_TLS_MUTUAL
  value: {{ $v.grpcTls.mutual | toString | quote }}
{{- if $v.grpcTls.serverName }}
- name: CHAOS_CORE_GRPC_TLS_SERVER_NAME
  value: {{ $v.grpcTls.serverName | quote }}
{{- end }}
{{- if ne $name "edge" }}
- name: CHAOS_CORE_GRPC_HEALTH_PORT
  value: {{ $v.grpcTls.healthPort | quote }}
{{- end }}
{{- end }}
{{ include "chaos-core.secretEnv" (list "CHAOS_CORE_CONTEXT_KEY" $v.secrets.contextKey) }}
{{- if $v.secrets.contextKey.acceptedKey }}
{{ include "chaos-core.secretEnv" (list "CHAOS_CORE_CONTEXT_KEY_ACCEPTED" (dict "existingSecret" $v.secrets.contextKey.existingSecret "key" $v.secrets.contextKey.acceptedKey)) }}
{{- end }}
{{- range $callee := index (include "chaos-core.callees" $root | fromJson) $name }}
- name: {{ upper $callee }}_ADDR
  value: {{ include "chaos-core.addr" (list $root $callee) | quote }}
{{- end }}
{{- if eq (include "chaos-core.usesPostgres" $name) "true" }}
{{ include "chaos-core.secretEnv" (list "DATABASE_URL" $v.secrets.database) }}
{{- if $v.migrate.enabled }}
- name: CHAOS_CORE_MIGRATE
  value: "verify"
{{- end }}
{{- end }}
{{- if and (eq (include "chaos-core.usesRedis" $name) "true") $v.secrets.redis.existingSecret }}
{{ include "chaos-core.secretEnv" (list "REDIS_URL" $v.secrets.redis) }}
{{- if ne $name "edge" }}
{{- /* Policy publishes tenant generations and changes where the edge reads them: under the edge's default prefix, whatever config.redisPrefix says (the chart gives the edge none). */}}
- name: CHAOS_CORE_REDIS_PREFIX
  value: {{ ternary "chaoscore:" $v.config.redisPrefix (eq $name "policy") | quote }}
{{- end }}
{{- end }}
{{- range $f := index (include "chaos-core.secretFiles" $root | fromJson) $name | default list }}
- name: {{ $f.var }}
  value: {{ printf "%s/%s" $f.dir (index $v.secrets $f.secret).key | quote }}
{{- end }}
{{- if eq $name "edge" }}
{{- with $v.config.edge }}
- name: CHAOS_CORE_MRTR_TTL_SECONDS
  value: {{ .mrtrTtlSeconds | quote }}
- name: CHAOS_CORE_SESSION_TTL_SECONDS
  value: {{ .sessionTtlSeconds | quote }}
- name: CHAOS_CORE_MAX_SESSIONS_PER_KEY
  value: {{ .maxSessionsPerKey | quote }}
- name: CHAOS_CORE_APPROVAL_WAIT_SECONDS
  value: {{ .approvalWaitSeconds | quote }}
- name: CHAOS_CORE_CONSOLE
  value: {{ .console | quote }}
{{- if .publicUrl }}
- name: CHAOS_CORE_PUBLIC_URL
  value: {{ .publicUrl | quote }}
{{- end }}
{{- if .allowedHosts }}
- name: MCP_ALLOWED_HOSTS
  value: {{ join "," .allowedHosts | quote }}
{{- end }}
{{- if .allowedOrigins }}
- name: MCP_ALLOWED_ORIGINS
  value: {{ join "," .allowedOrigins | quote }}
{{- end }}
{{- if .contractKeys }}
- name: CHAOS_CORE_CONTRACT_KEYS
  value: {{ join "," .contractKeys | quote }}
{{- end }}
{{- with .oauth }}
{{- if .issuer }}
- name: CHAOS_CORE_OAUTH_ISSUER
  value: {{ .issuer | quote }}
- name: CHAOS_CORE_OAUTH_RESOURCE
  value: {{ .resource | quote }}
{{- if .jwksUrl }}
- name: CHAOS_CORE_OAUTH_JWKS_URL
  value: {{ .jwksUrl | quote }}
{{- end }}
{{- if .algorithms }}
- name: CHAOS_CORE_OAUTH_ALGORITHMS
  value: {{ join "," .algorithms | quote }}
{{- end }}
- name: CHAOS_CORE_OAUTH_TENANT_CLAIM
  value: {{ .tenantClaim | quote }}
- name: CHAOS_CORE_OAUTH_ACCEPT_JWT_TYP
  value: {{ .acceptJwtTyp | toString | quote }}
- name: CHAOS_CORE_OAUTH_CLOCK_SKEW_SECONDS
  value: {{ .clockSkewSeconds | quote }}
{{- if .introspection.url }}
- name: CHAOS_CORE_OAUTH_INTROSPECTION_URL
  value: {{ .introspection.url | quote }}
- name: CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID
  value: {{ .introspection.clientId | quote }}
- name: CHAOS_CORE_OAUTH_INTROSPECTION_CACHE_SECONDS
  value: {{ .introspection.cacheSeconds | quote }}
{{- end }}
{{- if .console.clientId }}
- name: CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID
  value: {{ .console.clientId | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if include "chaos-core.rateLimits" $root }}
- name: CHAOS_CORE_RATE_LIMITS_FILE
  value: {{ printf "/etc/chaos-core/rate-limits/%s" $v.config.edge.rateLimits.key | quote }}
{{- end }}
{{- end }}
{{- if eq $name "policy" }}
- name: CHAOS_CORE_ADMIN_PORT
  value: {{ $v.admin.port | quote }}
{{- include "chaos-core.httpAllowedAddressesEnv" $root }}
{{- end }}
{{- if eq $name "cognition" }}
{{- with $v.config.cognition }}
{{- if .provider }}
- name: CHAOS_CORE_PROVIDER
  value: {{ .provider | quote }}
{{- end }}
{{- if .openaiModel }}
- name: OPENAI_MODEL
  value: {{ .openaiModel | quote }}
{{- end }}
{{- if .openaiBaseUrl }}
- name: OPENAI_BASE_URL
  value: {{ .openaiBaseUrl | quote }}
{{- end }}
- name: CHAOS_CORE_POLICY_SNAPSHOTS
  value: {{ ternary "on" "off" .policySnapshots | quote }}
{{- end }}
{{- if $v.secrets.openaiApiKey.existingSecret }}
{{ include "chaos-core.secretEnv" (list "OPENAI_API_KEY" $v.secrets.openaiApiKey) }}
{{- end }}
{{- with $v.upstreams }}
{{- $dirs := include "chaos-core.upstreamsDirs" $root | fromJson }}
{{- $configMap := include "chaos-core.upstreamsConfigMap" $root }}
{{- if $configMap }}
- name: CHAOS_CORE_UPSTREAMS_FILE
  value: {{ printf "%s/upstreams.json" $dirs.config | quote }}
- name: CHAOS_CORE_UPSTREAMS_LOCK
  value: {{ printf "%s/upstreams.lock" $dirs.config | quote }}
- name: CHAOS_CORE_UPSTREAMS_WORK_DIR
  value: {{ $dirs.work | quote }}
{{- end }}
{{- /* The tenants' upstreams are served without the ConfigMap too: a cap the operator changed applies to them. */}}
{{- if or $configMap (ne (.maxResultBytes | int64) (include "chaos-core.defaultMaxResultBytes" $root | int64)) }}
- name: CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES
  value: {{ .maxResultBytes | int64 | toString | quote }}
{{- end }}
{{- if ne (.tokenMaxSeconds | int64) 300 }}
- name: CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS
  value: {{ .tokenMaxSeconds | int64 | toString | quote }}
{{- end }}
{{- /* Header references of the operator's upstreams and of the tenants' own resolve here, with or without the ConfigMap. */}}
{{- if .secrets.existingSecret }}
- name: CHAOS_CORE_UPSTREAM_SECRETS_DIR
  value: {{ $dirs.secrets | quote }}
{{- end }}
{{- end }}
{{- include "chaos-core.httpAllowedAddressesEnv" $root }}
{{- end }}
{{- if eq $name "ledger" }}
- name: CHAOS_CORE_LEDGER_ORIGIN
  value: {{ $v.config.ledger.origin | quote }}
{{- if include "chaos-core.ledgerPolicy" $root }}
- name: CHAOS_CORE_LEDGER_POLICY_FILE
  value: {{ printf "/etc/chaos-core/ledger-policy/%s" $v.config.ledger.policy.key | quote }}
{{- end }}
{{- if $v.config.ledger.webhookUrl }}
- name: CHAOS_CORE_WEBHOOK_URL
  value: {{ $v.config.ledger.webhookUrl | quote }}
{{ include "chaos-core.secretEnv" (list "CHAOS_CORE_WEBHOOK_SECRET" $v.secrets.webhookSecret) }}
{{- if $v.config.ledger.webhookCheckpoints }}
- name: CHAOS_CORE_WEBHOOK_CHECKPOINTS
  value: "true"
{{- end }}
{{- end }}
{{- if $v.config.edge.publicUrl }}
- name: CHAOS_CORE_PUBLIC_URL
  value: {{ $v.config.edge.publicUrl | quote }}
{{- end }}
{{- end }}
{{- include "chaos-core.otelEnv" (list $root $name) }}
{{- include "chaos-core.metricsEnv" $root }}
{{- end -}}

{{/* The Prometheus scrape endpoint, on the pod's address so the ServiceMonitor reaches it (services default to loopback). */}}
{{- define "chaos-core.metricsEnv" -}}
{{- $p := .Values.metrics.prometheus -}}
{{- if $p.enabled }}
- name: CHAOS_CORE_METRICS_PROMETHEUS_PORT
  value: {{ $p.port | quote }}
- name: CHAOS_CORE_METRICS_PROMETHEUS_HOST
  value: "0.0.0.0"
{{- end }}
{{- end -}}

{{/* The OTLP endpoint with tracing on; the service name and resource whenever anything reports (traces, or Prometheus's target_info). */}}
{{- define "chaos-core.otelEnv" -}}
{{- $root := index . 0 -}}
{{- $t := $root.Values.telemetry -}}
{{- if $t.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $t.otlpEndpoint | quote }}
{{- end }}
{{- if or $t.otlpEndpoint $root.Values.metrics.prometheus.enabled }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "chaos-core-%s" (index . 1) | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "service.namespace=%s,deployment.environment.name=%s%s" $root.Release.Namespace $root.Release.Name (ternary (printf ",%s" $t.resourceAttributes) "" (ne $t.resourceAttributes "")) | quote }}
{{- end }}
{{- end -}}

{{/* Where the tenant admin API is reached: policy's ClusterIP Service by its full name (a gRPC TLS certificate for *.<namespace>.svc.cluster.local covers it). */}}
{{- define "chaos-core.adminAddr" -}}
{{- printf "%s-policy.%s.svc.cluster.local:%v" (include "chaos-core.fullname" .) .Release.Namespace .Values.admin.port -}}
{{- end -}}

{{/*
The services `chaos-core tenants export|delete|retention` call on their main port as the operator
of each tenant (services/standalone/src/tenant-data.ts): memory's and council's ExportData,
DeleteData and ApplyRetention, the ledger's ExportEntries and Append, policy's GetPolicy. Their
*_ADDR variables go to the admin pods, and their NetworkPolicies admit admin.podSelector's pods to
that port.
*/}}
{{- define "chaos-core.adminCallees" -}}
{{- list "policy" "memory" "council" "ledger" | toJson -}}
{{- end -}}

{{/* The NetworkPolicy peer of the operator's pods: admin.podSelector, in admin.namespaceSelector's namespaces or else the release's. */}}
{{- define "chaos-core.adminPeer" -}}
- podSelector:
    {{- toYaml .Values.admin.podSelector | nindent 4 }}
  {{- with .Values.admin.namespaceSelector }}
  namespaceSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* The labels the chart's admin pods carry (the toolbox's --labels, the retention CronJob's pods): admin.podLabels, and admin.podSelector.matchLabels over them. */}}
{{- define "chaos-core.adminLabels" -}}
{{- merge (dict) (.Values.admin.podSelector.matchLabels | default dict) (.Values.admin.podLabels | default dict) | toJson -}}
{{- end -}}

{{/*
The terms of a label selector that these labels do not meet, as Kubernetes reads them (every term
must hold), spelled for a message: `key=value` or `key Operator [values]`. Empty: it selects them.
Arguments: (list $selector $labels).
*/}}
{{- define "chaos-core.unmetTerms" -}}
{{- $sel := index . 0 | default dict -}}
{{- $labels := index . 1 -}}
{{- $out := list -}}
{{- range $k, $want := $sel.matchLabels | default dict -}}
{{- if not (and (hasKey $labels $k) (eq (toString (get $labels $k)) (toString $want))) -}}
{{- $out = append $out (printf "%s=%s" $k (toString $want)) -}}
{{- end -}}
{{- end -}}
{{- range $e := $sel.matchExpressions | default list -}}
{{- $has := hasKey $labels $e.key -}}
{{- $in := and $has (has (toString (get $labels $e.key)) ($e.values | default list)) -}}
{{- $ok := false -}}
{{- if eq $e.operator "Exists" -}}{{- $ok = $has -}}
{{- else if eq $e.operator "DoesNotExist" -}}{{- $ok = not $has -}}
{{- else if eq $e.operator "In" -}}{{- $ok = $in -}}
{{- else -}}{{- $ok = not $in -}}
{{- end -}}
{{- if not $ok -}}
{{- $out = append $out (printf "%s %s %s" $e.key $e.operator (toJson ($e.values | default list))) -}}
{{- end -}}
{{- end -}}
{{- $out | toJson -}}
{{- end -}}

{{/*
What an admin pod needs to run `chaos-core tenants|keys` against the release, as JSON {env, mounts,
volumes}: the context key from its Secret, the admin address, the data services' addresses (the
ones the edge gets), and with gRPC TLS the certificate Secret and its variables as the services
get them. Shared by NOTES.txt's toolbox pod and the retention CronJob.
*/}}
{{- define "chaos-core.adminPod" -}}
{{- $v := .Values -}}
{{- $env := list (dict "name" "CHAOS_CORE_CONTEXT_KEY" "valueFrom" (dict "secretKeyRef" (dict "name" $v.secrets.contextKey.existingSecret "key" $v.secrets.contextKey.key))) (dict "name" "CHAOS_CORE_ADMIN_ADDR" "value" (include "chaos-core.adminAddr" .)) -}}
{{- range $callee := include "chaos-core.adminCallees" . | fromJsonArray -}}
{{- $env = append $env (dict "name" (printf "%s_ADDR" (upper $callee)) "value" (include "chaos-core.addr" (list $ $callee))) -}}
{{- end -}}
{{- $mounts := list (dict "name" "tmp" "mountPath" "/tmp") -}}
{{- $volumes := list (dict "name" "tmp" "emptyDir" (dict "sizeLimit" $v.tmpSizeLimit)) -}}
{{- if $v.grpcTls.enabled -}}
{{- $t := $v.secrets.grpcTls -}}
{{- $env = concat $env (list (dict "name" "CHAOS_CORE_GRPC_TLS_CERT_FILE" "value" (printf "/etc/chaos-core/grpc-tls/%s" $t.certKey)) (dict "name" "CHAOS_CORE_GRPC_TLS_KEY_FILE" "value" (printf "/etc/chaos-core/grpc-tls/%s" $t.keyKey)) (dict "name" "CHAOS_CORE_GRPC_TLS_CA_FILE" "value" (printf "/etc/chaos-core/grpc-tls/%s" $t.caKey)) (dict "name" "CHAOS_CORE_GRPC_TLS_MUTUAL" "value" ($v.grpcTls.mutual | toString))) -}}
{{- if $v.grpcTls.serverName -}}
{{- $env = append $env (dict "name" "CHAOS_CORE_GRPC_TLS_SERVER_NAME" "value" $v.grpcTls.serverName) -}}
{{- end -}}
{{- $mounts = append $mounts (dict "name" "grpc-tls" "mountPath" "/etc/chaos-core/grpc-tls" "readOnly" true) -}}
{{- $volumes = append $volumes (dict "name" "grpc-tls" "secret" (dict "secretName" $t.existingSecret "defaultMode" 288 "items" (list (dict "key" $t.certKey "path" $t.certKey) (dict "key" $t.keyKey "path" $t.keyKey) (dict "key" $t.caKey "path" $t.caKey)))) -}}
{{- end -}}
{{- dict "env" $env "mounts" $mounts "volumes" $volumes | toJson -}}
{{- end -}}

{{/*
The toolbox pod NOTES.txt prints: a strategic-merge patch for `kubectl run --overrides` onto the
pod kubectl makes (container named after the pod): chaos-core.adminPod's environment and volumes
with the chart's security contexts. Arguments: (list $ "pod-name").
*/}}
{{- define "chaos-core.adminToolbox" -}}
{{- $root := index . 0 -}}
{{- $v := $root.Values -}}
{{- $parts := include "chaos-core.adminPod" $root | fromJson -}}
{{- $container := dict "name" (index . 1) "env" $parts.env "securityContext" $v.containerSecurityContext "volumeMounts" $parts.mounts -}}
{{- $spec := dict "automountServiceAccountToken" false "enableServiceLinks" false "securityContext" $v.podSecurityContext "containers" (list $container) "volumes" $parts.volumes -}}
{{- with $v.imagePullSecrets -}}{{- $_ := set $spec "imagePullSecrets" . -}}{{- end -}}
{{- dict "spec" $spec | toJson -}}
{{- end -}}

{{/* The retention CronJob's name: at most 52 characters, as Kubernetes allows a CronJob (its Jobs add 11). */}}
{{- define "chaos-core.retentionName" -}}
{{- printf "%s-tenant-retention" (include "chaos-core.fullname" . | trunc 35 | trimSuffix "-") -}}
{{- end -}}

{{/* The retention CronJob's pod labels: its component's, and the admin pods' (chaos-core.adminLabels) so that the NetworkPolicies admit it. */}}
{{- define "chaos-core.retentionPodLabels" -}}
{{- merge (include "chaos-core.componentLabels" (list . "tenant-retention") | fromYaml) (include "chaos-core.adminLabels" . | fromJson) | toJson -}}
{{- end -}}

{{/* The checks NOTES.txt (and every install) runs: invalid combinations fail with a message naming the value. */}}
{{- define "chaos-core.validate" -}}
{{- $v := .Values -}}
{{- range $s := list "contextKey" "database" "apiKeys" "mrtrKeyring" "ledgerKeyring" -}}
{{- if not (index $v.secrets $s).existingSecret -}}
{{- fail (printf "secrets.%s.existingSecret is required: the name of a Secret in namespace %s holding key %q (the chart never generates or defaults a secret; see helm/README.md)" $s $.Release.Namespace (index $v.secrets $s).key) -}}
{{- end -}}
{{- end -}}
{{- range $n := list "edge" "cognition" -}}
{{- if and (include "chaos-core.multi" (list $ $n)) (not $v.secrets.redis.existingSecret) -}}
{{- fail (printf "secrets.redis.existingSecret is required when components.%s can run more than one replica (replicas > 1 or hpa.enabled): its replicas share %s through Redis" $n (ternary "MCP sessions" "plans" (eq $n "edge"))) -}}
{{- end -}}
{{- end -}}
{{- if and $v.ingress.enabled (not $v.ingress.host) -}}
{{- fail "ingress.host is required with ingress.enabled: the host name clients reach the edge at" -}}
{{- end -}}
{{- with $v.config.edge.oauth -}}
{{- if and (not .issuer) (or .resource .jwksUrl .introspection.url .console.clientId) -}}
{{- fail "config.edge.oauth.issuer is required with config.edge.oauth.resource, jwksUrl, introspection.url or console.clientId: without the issuer OAuth is off and they would do nothing" -}}
{{- end -}}
{{- if and .issuer (not .resource) -}}
{{- fail "config.edge.oauth.resource is required with config.edge.oauth.issuer: the edge's canonical resource URI (the audience of its tokens), e.g. https://mcp.example.com/mcp" -}}
{{- end -}}
{{- if and .issuer .introspection.url (or (not .introspection.clientId) (not $v.secrets.oauthIntrospection.existingSecret)) -}}
{{- fail "config.edge.oauth.introspection.url needs config.edge.oauth.introspection.clientId and secrets.oauthIntrospection.existingSecret (the edge's client secret at the introspection endpoint)" -}}
{{- end -}}
{{- if and .issuer .console.clientId (not $v.secrets.consoleOauthClient.existingSecret) -}}
{{- fail "config.edge.oauth.console.clientId needs secrets.consoleOauthClient.existingSecret (the approval console's client secret at the issuer)" -}}
{{- end -}}
{{- if and .console.clientId (eq $v.config.edge.console "off") -}}
{{- fail "config.edge.oauth.console.clientId signs people in to the approval console, which config.edge.console turns off: unset one of them" -}}
{{- end -}}
{{- end -}}
{{- if and $v.config.ledger.webhookUrl (not $v.secrets.webhookSecret.existingSecret) -}}
{{- fail "secrets.webhookSecret.existingSecret is required with config.ledger.webhookUrl: the whsec_ secret that signs every notification" -}}
{{- end -}}
{{- if and (eq $v.config.cognition.provider "openai") (or (not $v.secrets.openaiApiKey.existingSecret) (not $v.config.cognition.openaiModel)) -}}
{{- fail "config.cognition.provider openai needs secrets.openaiApiKey.existingSecret and config.cognition.openaiModel" -}}
{{- end -}}
{{- if and (eq $v.config.cognition.provider "openai-compatible") (or (not $v.config.cognition.openaiBaseUrl) (not $v.config.cognition.openaiModel)) -}}
{{- fail "config.cognition.provider openai-compatible needs config.cognition.openaiBaseUrl and config.cognition.openaiModel" -}}
{{- end -}}
{{- if and $v.grpcTls.enabled (not $v.secrets.grpcTls.existingSecret) -}}
{{- fail "secrets.grpcTls.existingSecret is required with grpcTls.enabled: a Secret with the certificate, its key and the CA (a cert-manager Certificate's Secret: tls.crt, tls.key, ca.crt)" -}}
{{- end -}}
{{- if and (not $v.grpcTls.enabled) (or $v.grpcTls.mutual $v.grpcTls.serverName) -}}
{{- fail "grpcTls.mutual and grpcTls.serverName need grpcTls.enabled: without it the services talk plaintext" -}}
{{- end -}}
{{- if and $v.config.ledger.policy.existingConfigMap $v.config.ledger.policy.document -}}
{{- fail "config.ledger.policy: set existingConfigMap or document, not both" -}}
{{- end -}}
{{- if lt (int (include "chaos-core.shutdownGrace" .)) 1 -}}
{{- fail (printf "lifecycle.preStopSeconds (%v) leaves no time to drain within lifecycle.terminationGracePeriodSeconds (%v): the drain gets terminationGracePeriodSeconds - preStopSeconds - 5 s, at least 1" $v.lifecycle.preStopSeconds $v.lifecycle.terminationGracePeriodSeconds) -}}
{{- end -}}
{{- if and $v.metrics.serviceMonitor.enabled (not $v.metrics.prometheus.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.prometheus.enabled: the ServiceMonitor scrapes the metrics port that setting opens" -}}
{{- end -}}
{{- range $n, $c := $v.components -}}
{{- if and $v.metrics.prometheus.enabled (eq (int $c.port) (int $v.metrics.prometheus.port)) -}}
{{- fail (printf "metrics.prometheus.port (%v) is components.%s.port too: pick another" $v.metrics.prometheus.port $n) -}}
{{- end -}}
{{- end -}}
{{- $admin := int $v.admin.port -}}
{{- if eq (int $v.components.policy.port) $admin -}}
{{- fail (printf "admin.port (%v) is components.policy.port too: the tenant admin API needs a port of its own (its NetworkPolicy rule admits only the operator's pods)" $v.admin.port) -}}
{{- end -}}
{{- if and $v.metrics.prometheus.enabled (eq (int $v.metrics.prometheus.port) $admin) -}}
{{- fail (printf "admin.port (%v) is metrics.prometheus.port too: pick another" $v.admin.port) -}}
{{- end -}}
{{- if and $v.grpcTls.enabled (eq (int $v.grpcTls.healthPort) $admin) -}}
{{- fail (printf "admin.port (%v) is grpcTls.healthPort too: pick another" $v.admin.port) -}}
{{- end -}}
{{- if not (or $v.admin.podSelector.matchLabels $v.admin.podSelector.matchExpressions) -}}
{{- fail "admin.podSelector must select some pods (matchLabels or matchExpressions, e.g. chaos-core/admin: \"true\"): an empty selector would open the tenant admin API to every pod" -}}
{{- end -}}
{{- if $v.admin.retention.enabled -}}
{{- /* The CronJob is admitted by the same rules as the operator's pods: refuse what would leave it unreachable, rather than fail every hour. */}}
{{- $unmet := include "chaos-core.unmetTerms" (list $v.admin.podSelector (include "chaos-core.retentionPodLabels" . | fromJson)) | fromJsonArray -}}
{{- if $unmet -}}
{{- fail (printf "admin.retention.enabled: the retention CronJob's pods carry admin.podSelector.matchLabels and admin.podLabels, which do not meet admin.podSelector's %s, so the NetworkPolicies would not admit them: set admin.podLabels to labels that do (or admin.retention.enabled=false)" (join ", " $unmet)) -}}
{{- end -}}
{{- /* Of the namespace's labels only its name is known here: check the terms on it. */}}
{{- $nameKey := "kubernetes.io/metadata.name" -}}
{{- $ns := $v.admin.namespaceSelector -}}
{{- $byName := dict "matchLabels" (dict) "matchExpressions" (list) -}}
{{- if hasKey ($ns.matchLabels | default dict) $nameKey -}}{{- $_ := set $byName.matchLabels $nameKey (get $ns.matchLabels $nameKey) -}}{{- end -}}
{{- range $e := $ns.matchExpressions | default list -}}
{{- if eq $e.key $nameKey -}}{{- $_ := set $byName "matchExpressions" (append $byName.matchExpressions $e) -}}{{- end -}}
{{- end -}}
{{- $unmetNs := include "chaos-core.unmetTerms" (list $byName (dict $nameKey .Release.Namespace)) | fromJsonArray -}}
{{- if $unmetNs -}}
{{- fail (printf "admin.retention.enabled: the retention CronJob runs in namespace %s, which admin.namespaceSelector does not select (%s), so the NetworkPolicies would not admit it: let admin.namespaceSelector select namespace %s too (or admin.retention.enabled=false)" .Release.Namespace (join ", " $unmetNs) .Release.Namespace) -}}
{{- end -}}
{{- end -}}
{{- range $n, $c := $v.components -}}
{{- if and $v.grpcTls.enabled (eq (int $c.port) (int $v.grpcTls.healthPort)) -}}
{{- fail (printf "grpcTls.healthPort (%v) is components.%s.port too: the plaintext health port needs a port of its own" $v.grpcTls.healthPort $n) -}}
{{- end -}}
{{- if and (hasKey $c "hpa") $c.hpa.enabled (gt (int $c.hpa.minReplicas) (int $c.hpa.maxReplicas)) -}}
{{- fail (printf "components.%s.hpa.minReplicas (%v) is above maxReplicas (%v)" $n $c.hpa.minReplicas $c.hpa.maxReplicas) -}}
{{- end -}}
{{- end -}}
{{- end -}}
