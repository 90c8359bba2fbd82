{{/*
The operator's upstreams declared in values (docs/federation-platform.md §1, §2): the ConfigMap
cognition reads, and a stdio declaration with `bridge` run as its own Deployment behind
`chaos-core bridge`.
*/}}

{{/* The ConfigMap cognition mounts: the operator's own (upstreams.configMap) or the one rendered from upstreams.declarations; empty: none. */}}
{{- define "chaos-core.upstreamsConfigMap" -}}
{{- $u := .Values.upstreams -}}
{{- if and $u.configMap $u.declarations -}}
{{- fail "upstreams.configMap and upstreams.declarations: give one — an existing ConfigMap, or the declarations and their lock for the chart to render" -}}
{{- end -}}
{{- if $u.configMap -}}
{{- $u.configMap -}}
{{- else if $u.declarations -}}
{{- include "chaos-core.fullname" . }}-upstreams
{{- end -}}
{{- end -}}

{{/* The port a bridge listens on in its pod. */}}
{{- define "chaos-core.bridgePort" -}}8080{{- end -}}

{{/* A bridged upstream's Deployment and Service name (at most 63 characters). Arguments: (list $ $decl). */}}
{{- define "chaos-core.bridgeName" -}}
{{- $root := index . 0 -}}
{{- printf "%s-up-%s" (include "chaos-core.fullname" $root | trunc 27 | trimSuffix "-") ((index . 1).name | replace "_" "-") -}}
{{- end -}}

{{/* A bridged upstream's selector labels. Arguments: (list $ $decl). */}}
{{- define "chaos-core.bridgeSelectorLabels" -}}
{{- include "chaos-core.selectorLabels" (list (index . 0) (printf "upstream-%s" ((index . 1).name | replace "_" "-"))) -}}
{{- end -}}

{{/*
upstreams.json as cognition reads it (kit's parseUpstreamsFile): each declaration without the
chart's keys (egress, bridge); a bridged one as a Streamable HTTP upstream at its Service, carrying
the bridge's token as a header reference into upstreams.secrets.existingSecret.
*/}}
{{- define "chaos-core.upstreamsJson" -}}
{{- $root := . -}}
{{- $u := .Values.upstreams -}}
{{- $out := list -}}
{{- range $i, $d := $u.declarations -}}
{{- $at := printf "upstreams.declarations[%d] (%s)" $i $d.name -}}
{{- if $d.bridge -}}
{{- if not $d.command -}}{{- fail (printf "%s: bridge runs a stdio upstream: give command (and args), not url" $at) -}}{{- end -}}
{{- if not $u.secrets.existingSecret -}}{{- fail (printf "%s: bridge.tokenKey is a key of upstreams.secrets.existingSecret, which is empty" $at) -}}{{- end -}}
{{- if eq ($d.isolation | default "shared") "tenant" -}}{{- fail (printf "%s: isolation tenant needs the process in cognition's pod; a bridged upstream starts one process per MCP session (leave bridge out, or isolation)" $at) -}}{{- end -}}
{{- $http := dict "name" $d.name "url" (printf "http://%s:%s/mcp" (include "chaos-core.bridgeName" (list $root $d)) (include "chaos-core.bridgePort" $root)) "headers" (dict "Authorization" (dict "file" $d.bridge.tokenKey "prefix" "Bearer ")) -}}
{{- range $k := list "timeoutMs" "risk" "trustAnnotations" "disabled" "exposure" -}}
{{- if hasKey $d $k -}}{{- $_ := set $http $k (index $d $k) -}}{{- end -}}
{{- end -}}
{{- $out = append $out $http -}}
{{- else -}}
{{- if and $d.url (not $d.egress) $root.Values.networkPolicy.enabled -}}
{{- fail (printf "%s: a Streamable HTTP upstream needs egress (NetworkPolicy peers and ports: a NetworkPolicy cannot name its host) while networkPolicy.enabled; nothing undeclared is reachable" $at) -}}
{{- end -}}
{{- $out = append $out (omit $d "egress" "bridge") -}}
{{- end -}}
{{- end -}}
{{- dict "upstreams" $out | toPrettyJson -}}
{{- end -}}

{{/* Cognition's egress to the declared upstreams: each HTTP one's rule, each bridge's Service port. */}}
{{- define "chaos-core.upstreamsEgress" -}}
{{- $root := . -}}
{{- range $d := .Values.upstreams.declarations }}
{{- if $d.bridge }}
- to:
    - podSelector:
        matchLabels:
          {{- include "chaos-core.bridgeSelectorLabels" (list $root $d) | nindent 10 }}
  ports:
    - port: {{ include "chaos-core.bridgePort" $root }}
      protocol: TCP
{{- else if $d.egress }}
- {{ toYaml $d.egress | nindent 2 | trim }}
{{- end }}
{{- end }}
{{- end -}}
