{{/* The Deployment of one component. Arguments: (list $ "edge"). */}}
{{- define "chaos-core.deployment" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $v := $root.Values -}}
{{- $c := index $v.components $name -}}
{{- $files := index (include "chaos-core.secretFiles" $root | fromJson) $name | default list }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "chaos-core.fullname" $root }}-{{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "chaos-core.componentLabels" (list $root $name) | nindent 4 }}
spec:
  {{- if not (and (hasKey $c "hpa") $c.hpa.enabled) }}
  replicas: {{ $c.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "chaos-core.selectorLabels" (list $root $name) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "chaos-core.componentLabels" (list $root $name) | nindent 8 }}
      {{- $annotations := $c.podAnnotations | default dict }}
      {{- if and (eq $name "ledger") (not $v.config.ledger.policy.existingConfigMap) $v.config.ledger.policy.document }}
      {{- /* The ledger reads its policy file at start: a changed document rolls its pods. */}}
      {{- $annotations = merge (dict "checksum/ledger-policy" (toJson $v.config.ledger.policy.document | sha256sum)) $annotations }}
      {{- end }}
      {{- if and (eq $name "edge") (not $v.config.edge.rateLimits.existingConfigMap) $v.config.edge.rateLimits.document }}
      {{- /* The edge reads its rate limits at start: a changed document rolls its pods. */}}
      {{- $annotations = merge (dict "checksum/rate-limits" (toJson $v.config.edge.rateLimits.document | sha256sum)) $annotations }}
      {{- end }}
      {{- if and (eq $name "cognition") $v.upstreams.declarations }}
      {{- /* Cognition reads the declarations at start: a changed one rolls its pods; a changed lock does not (it is re-read as the mount changes). */}}
      {{- $annotations = merge (dict "checksum/upstreams" (toJson $v.upstreams.declarations | sha256sum)) $annotations }}
      {{- end }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "chaos-core.serviceAccountName" $root }}
      automountServiceAccountToken: false
      enableServiceLinks: false
      securityContext:
        {{- toYaml $v.podSecurityContext | nindent 8 }}
      {{- with $v.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- /* CHAOS_CORE_SHUTDOWN_GRACE_SECONDS is derived from it (chaos-core.shutdownGrace): the drain ends before the kubelet's SIGKILL. */}}
      terminationGracePeriodSeconds: {{ $v.lifecycle.terminationGracePeriodSeconds }}
      containers:
        - name: {{ $name }}
          image: {{ include "chaos-core.image" $root | quote }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          args: [{{ $name | quote }}]
          ports:
            - name: {{ ternary "http" "grpc" (eq $name "edge") }}
              containerPort: {{ $c.port }}
              protocol: TCP
            {{- if eq $name "policy" }}
            - name: admin
              containerPort: {{ $v.admin.port }}
              protocol: TCP
            {{- end }}
            {{- if $v.metrics.prometheus.enabled }}
            - name: metrics
              containerPort: {{ $v.metrics.prometheus.port }}
              protocol: TCP
              {{- end }}
            {{- if and $v.grpcTls.enabled (ne $name "edge") }}
            - name: health
              containerPort: {{ $v.grpcTls.healthPort }}
              protocol: TCP
            {{- end }}
          env:
            {{- include "chaos-core.env" (list $root $name) | nindent 12 }}
          {{- if eq $name "edge" }}
          readinessProbe:
            httpGet: {path: /readyz, port: http}
            periodSeconds: 5
            failureThreshold: 3
          livenessProbe:
            httpGet: {path: /healthz, port: http}
            initialDelaySeconds: 10
            periodSeconds: 10
            failureThreshold: 3
          {{- else }}
          {{- /* The kubelet's gRPC probe speaks no TLS: with gRPC TLS on it asks the plaintext health-only port. */}}
          {{- $probePort := ternary $v.grpcTls.healthPort $c.port $v.grpcTls.enabled }}
          readinessProbe:
            grpc: {port: {{ $probePort }}}
            periodSeconds: 5
            failureThreshold: 3
          livenessProbe:
            grpc: {port: {{ $probePort }}, service: liveness}
            initialDelaySeconds: 10
            periodSeconds: 10
            failureThreshold: 3
          {{- end }}
          {{- if gt (int $v.lifecycle.preStopSeconds) 0 }}
          lifecycle:
            preStop:
              {{- /* Callers and the Service's endpoints learn the pod is going before SIGTERM stops new calls. */}}
              exec:
                command: ["sleep", {{ $v.lifecycle.preStopSeconds | toString | quote }}]
          {{- end }}
          securityContext:
            {{- toYaml $v.containerSecurityContext | nindent 12 }}
          {{- with $c.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- range $f := $files }}
            - name: {{ kebabcase $f.secret }}
              mountPath: {{ $f.dir }}
              readOnly: true
            {{- end }}
            {{- if $v.grpcTls.enabled }}
            - name: grpc-tls
              mountPath: /etc/chaos-core/grpc-tls
              readOnly: true
            {{- end }}
            {{- if and (eq $name "ledger") (include "chaos-core.ledgerPolicy" $root) }}
            - name: ledger-policy
              mountPath: /etc/chaos-core/ledger-policy
              readOnly: true
            {{- end }}
            {{- if and (eq $name "edge") (include "chaos-core.rateLimits" $root) }}
            - name: rate-limits
              mountPath: /etc/chaos-core/rate-limits
              readOnly: true
            {{- end }}
            {{- if eq $name "cognition" }}
            {{- $dirs := include "chaos-core.upstreamsDirs" $root | fromJson }}
            {{- /* Whole directories, never subPath: the kubelet updates them in place, and cognition re-reads the lock as it changes. */}}
            {{- if include "chaos-core.upstreamsConfigMap" $root }}
            - name: upstreams
              mountPath: {{ $dirs.config }}
              readOnly: true
            {{- end }}
            {{- /* With or without the ConfigMap: the tenants' own upstreams read their header references here too. */}}
            {{- if $v.upstreams.secrets.existingSecret }}
            - name: upstream-secrets
              mountPath: {{ $dirs.secrets }}
              readOnly: true
            {{- end }}
            {{- if include "chaos-core.upstreamsConfigMap" $root }}
            {{- /* The root filesystem is read-only: stdio upstreams run (and keep their HOME) here. */}}
            - name: upstreams-work
              mountPath: {{ $dirs.work }}
            {{- end }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: {{ $v.tmpSizeLimit }}
        {{- range $f := $files }}
        {{- $ref := index $v.secrets $f.secret }}
        - name: {{ kebabcase $f.secret }}
          secret:
            secretName: {{ $ref.existingSecret }}
            defaultMode: 288 # 0440 in octal: readable by the owner and fsGroup 1000 (decimal, so every YAML parser reads it alike)
            items:
              - key: {{ $ref.key }}
                path: {{ $ref.key }}
        {{- end }}
        {{- if $v.grpcTls.enabled }}
        {{- $t := $v.secrets.grpcTls }}
        - name: grpc-tls
          secret:
            secretName: {{ $t.existingSecret }}
            defaultMode: 288 # 0440
            items:
              - {key: {{ $t.certKey }}, path: {{ $t.certKey }}}
              - {key: {{ $t.keyKey }}, path: {{ $t.keyKey }}}
              - {key: {{ $t.caKey }}, path: {{ $t.caKey }}}
        {{- end }}
        {{- if and (eq $name "ledger") (include "chaos-core.ledgerPolicy" $root) }}
        - name: ledger-policy
          configMap:
            name: {{ include "chaos-core.ledgerPolicy" $root }}
            defaultMode: 288 # 0440
            items:
              - key: {{ $v.config.ledger.policy.key }}
                path: {{ $v.config.ledger.policy.key }}
        {{- end }}
        {{- if and (eq $name "edge") (include "chaos-core.rateLimits" $root) }}
        - name: rate-limits
          configMap:
            name: {{ include "chaos-core.rateLimits" $root }}
            defaultMode: 288 # 0440
            items:
              - key: {{ $v.config.edge.rateLimits.key }}
                path: {{ $v.config.edge.rateLimits.key }}
        {{- end }}
        {{- if eq $name "cognition" }}
        {{- if include "chaos-core.upstreamsConfigMap" $root }}
        - name: upstreams
          configMap:
            name: {{ include "chaos-core.upstreamsConfigMap" $root }}
            defaultMode: 288 # 0440
            {{- /* Named keys: a ConfigMap without one of them keeps the pod from starting, rather than serving nothing. */}}
            items:
              - {key: upstreams.json, path: upstreams.json}
              - {key: upstreams.lock, path: upstreams.lock}
        {{- end }}
        {{- if $v.upstreams.secrets.existingSecret }}
        - name: upstream-secrets
          secret:
            secretName: {{ $v.upstreams.secrets.existingSecret }}
            defaultMode: 288 # 0440
        {{- end }}
        {{- if include "chaos-core.upstreamsConfigMap" $root }}
        - name: upstreams-work
          emptyDir:
            sizeLimit: {{ $v.upstreams.workDirSizeLimit }}
        {{- end }}
        {{- end }}
      {{- with $c.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{ end -}}

{{/* The Services of one component: ClusterIP, and headless when it can run several replicas. */}}
{{- define "chaos-core.services" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $c := index $root.Values.components $name -}}
{{- $port := ternary "http" "grpc" (eq $name "edge") }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "chaos-core.fullname" $root }}-{{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "chaos-core.componentLabels" (list $root $name) | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "chaos-core.selectorLabels" (list $root $name) | nindent 4 }}
  ports:
    - name: {{ $port }}
      port: {{ $c.port }}
      targetPort: {{ $port }}
      protocol: TCP
      {{- if ne $name "edge" }}
      appProtocol: grpc
      {{- end }}
    {{- if eq $name "policy" }}
    {{- /* The tenant admin API: named here so the operator has an address; the NetworkPolicy admits only admin.podSelector to it. */}}
    - name: admin
      port: {{ $root.Values.admin.port }}
      targetPort: admin
      protocol: TCP
      appProtocol: grpc
    {{- end }}
    {{- if $root.Values.metrics.prometheus.enabled }}
    - name: metrics
      port: {{ $root.Values.metrics.prometheus.port }}
      targetPort: metrics
      protocol: TCP
    {{- end }}
{{- if and (ne $name "edge") (include "chaos-core.multi" (list $root $name)) }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "chaos-core.fullname" $root }}-{{ $name }}-headless
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "chaos-core.componentLabels" (list $root $name) | nindent 4 }}
spec:
  clusterIP: None
  publishNotReadyAddresses: false
  selector:
    {{- include "chaos-core.selectorLabels" (list $root $name) | nindent 4 }}
  ports:
    - name: grpc
      port: {{ $c.port }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
{{- end }}
{{ end -}}

{{- define "chaos-core.pdb" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $c := index $root.Values.components $name -}}
{{- if $c.pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "chaos-core.fullname" $root }}-{{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "chaos-core.componentLabels" (list $root $name) | nindent 4 }}
spec:
  maxUnavailable: {{ $c.pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "chaos-core.selectorLabels" (list $root $name) | nindent 6 }}
{{- end }}
{{ end -}}

{{- define "chaos-core.hpa" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $c := index $root.Values.components $name -}}
{{- if and (hasKey $c "hpa") $c.hpa.enabled }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "chaos-core.fullname" $root }}-{{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "chaos-core.componentLabels" (list $root $name) | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "chaos-core.fullname" $root }}-{{ $name }}
  minReplicas: {{ $c.hpa.minReplicas }}
  maxReplicas: {{ $c.hpa.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $c.hpa.targetCPUUtilizationPercentage }}
{{- end }}
{{ end -}}

{{/* Egress to a dependency: its peers (any address when empty) on its port. Arguments: (dict "port" N "to" list "protocol" "TCP"). */}}
{{- define "chaos-core.egressRule" -}}
- ports:
    - port: {{ .port }}
      protocol: TCP
  {{- with .to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* DNS egress, UDP and TCP 53, to the cluster DNS pods. */}}
{{- define "chaos-core.dnsEgress" -}}
{{- $np := .Values.networkPolicy -}}
- to:
    - namespaceSelector:
        {{- toYaml $np.dns.namespaceSelector | nindent 8 }}
      podSelector:
        {{- toYaml $np.dns.podSelector | nindent 8 }}
  ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end -}}

{{/* The NetworkPolicy of one component: ingress from its callers only (the edge: from outside), egress to DNS, its callees, Postgres, Redis, OTLP. */}}
{{- define "chaos-core.networkPolicy" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $v := $root.Values -}}
{{- $np := $v.networkPolicy -}}
{{- $c := index $v.components $name -}}
{{- $callers := include "chaos-core.callers" (list $root $name) | fromJsonArray -}}
{{- $callees := index (include "chaos-core.callees" $root | fromJson) $name }}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "chaos-core.fullname" $root }}-{{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "chaos-core.componentLabels" (list $root $name) | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "chaos-core.selectorLabels" (list $root $name) | nindent 6 }}
  policyTypes: [Ingress, Egress]
  ingress:
    - ports:
        - port: {{ $c.port }}
          protocol: TCP
      {{- if eq $name "edge" }}
      {{- with $np.edgeIngressFrom }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- else }}
      from:
        {{- range $caller := $callers }}
        - podSelector:
            matchLabels:
              {{- include "chaos-core.selectorLabels" (list $root $caller) | nindent 14 }}
        {{- end }}
      {{- end }}
    {{- if has $name (include "chaos-core.adminCallees" $root | fromJsonArray) }}
    {{- /* The operator's pods (the toolbox, the retention CronJob) hold the context key and so are the operator: `chaos-core tenants export|delete|retention` calls this main port. */}}
    - ports:
        - port: {{ $c.port }}
          protocol: TCP
      from:
        {{- include "chaos-core.adminPeer" $root | nindent 8 }}
    {{- end }}
    {{- if eq $name "policy" }}
    {{- /* The tenant admin API: the operator's pods only, never the callers admitted to the main port above. */}}
    - ports:
        - port: {{ $v.admin.port }}
          protocol: TCP
      from:
        {{- include "chaos-core.adminPeer" $root | nindent 8 }}
    {{- end }}
    {{- /* No rule for grpcTls.healthPort: the kubelet probes it from the pod's own node, and traffic from that node is always allowed (Kubernetes' NetworkPolicy semantics); a rule without peers would open the plaintext port to every pod. helm/README.md. */}}
    {{- if $v.metrics.prometheus.enabled }}
    - ports:
        - port: {{ $v.metrics.prometheus.port }}
          protocol: TCP
      {{- with $v.metrics.prometheus.from }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- end }}
  egress:
    {{- include "chaos-core.dnsEgress" $root | nindent 4 }}
    {{- range $callee := $callees }}
    - to:
        - podSelector:
            matchLabels:
              {{- include "chaos-core.selectorLabels" (list $root $callee) | nindent 14 }}
      ports:
        - port: {{ (index $v.components $callee).port }}
          protocol: TCP
    {{- end }}
    {{- if eq (include "chaos-core.usesPostgres" $name) "true" }}
    {{- include "chaos-core.egressRule" $np.postgres | nindent 4 }}
    {{- end }}
    {{- if and (eq (include "chaos-core.usesRedis" $name) "true") $v.secrets.redis.existingSecret }}
    {{- include "chaos-core.egressRule" $np.redis | nindent 4 }}
    {{- end }}
    {{- if $v.telemetry.otlpEndpoint }}
    {{- include "chaos-core.egressRule" $np.otlp | nindent 4 }}
    {{- end }}
    {{- if and (eq $name "cognition") (include "chaos-core.remoteProvider" $root) }}
    {{- include "chaos-core.egressRule" $np.provider | nindent 4 }}
    {{- end }}
    {{- if eq $name "cognition" }}
    {{- /* Streamable HTTP upstreams, the operator's and the tenants' own (one list: a policy sees the pod, not the upstream): only what the operator lists (none by default). */}}
    {{- with $v.upstreams.egress }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- /* Each upstream declared in values: its own rule, a bridge's Service port (docs/federation-platform.md §1). */}}
    {{- with include "chaos-core.upstreamsEgress" $root | trim }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- end }}
    {{- if and (eq $name "ledger") $v.config.ledger.webhookUrl }}
    {{- include "chaos-core.egressRule" $np.webhook | nindent 4 }}
    {{- end }}
    {{- if and (eq $name "edge") $v.config.edge.oauth.issuer }}
    {{- include "chaos-core.egressRule" $np.oauth | nindent 4 }}
    {{- end }}
{{ end -}}
