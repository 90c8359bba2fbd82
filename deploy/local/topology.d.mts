import type { ChildProcess } from "node:child_process";

export type Component = "edge" | "policy" | "memory" | "cognition" | "ledger" | "council";
export declare const CHART_PORTS: Readonly<Record<Component, number>>;
/** The chart's admin.port: policy's tenant admin API (CHAOS_CORE_ADMIN_PORT), shifted by portOffset like the others. */
export declare const CHART_ADMIN_PORT: number;
export declare const CHART_BRIDGE_PORT: number;
export declare const CHART_EDGE_READINESS: Readonly<{ periodSeconds: number; failureThreshold: number }>;
export declare const START_ORDER: readonly Component[];
export declare const COMPONENT_ORDER: readonly Component[];
/** The variables naming a port a process listens on. */
export declare const LISTEN_VARS: readonly string[];
export interface TopologyOptions {
  dir: string;
  databaseUrl: string;
  redisUrl?: string | undefined;
  portOffset?: number;
  otlpEndpoint?: string | undefined;
  logLevel?: string | undefined;
  contextKey?: string;
  /** A folder with tls.crt, tls.key and ca.crt: the chart's grpcTls values. */
  grpcTls?: { dir: string; mutual?: boolean; serverName?: string } | undefined;
  /** The chart's config.ledger.policy file. */
  ledgerPolicyFile?: string | undefined;
  /** The chart's metrics.prometheus.enabled (port: metrics.prometheus.port, default 9464; each process adds its index in COMPONENT_ORDER). */
  metrics?: { port?: number } | undefined;
  /** The chart's lifecycle values (defaults 30 and 5). */
  lifecycle?: { terminationGracePeriodSeconds?: number; preStopSeconds?: number } | undefined;
  /** The chart's config.edge.oauth (docs/auth.md); the introspection secret is a file, as the chart mounts it. */
  oauth?: OAuthTopologyOptions | undefined;
  /**
   * The chart's upstreams.declarations and upstreams.lock, and the keys of upstreams.secrets'
   * Secret (docs/federation-platform.md §1): a bridged stdio declaration runs as its own
   * `chaos-core bridge` process, as the chart runs its own Deployment.
   */
  upstreams?: LocalUpstreams | undefined;
}
export interface LocalUpstreams {
  declarations: ReadonlyArray<Record<string, unknown> & { name: string; bridge?: { tokenKey: string } }>;
  lock: string;
  secrets?: Record<string, string>;
}
export declare function localUpstreamsJson(o: { upstreams: LocalUpstreams; portOffset?: number }): string;
export interface OAuthTopologyOptions {
  issuer: string;
  resource: string;
  jwksUrl?: string;
  algorithms?: readonly string[];
  tenantClaim?: string;
  acceptJwtTyp?: boolean;
  clockSkewSeconds?: number;
  introspection?: { url: string; clientId: string; clientSecretFile: string; cacheSeconds?: number };
}
export interface Lifecycle {
  terminationGracePeriodSeconds?: number;
  preStopSeconds?: number;
}
export declare function shutdownGraceSeconds(lifecycle?: Lifecycle): number;
export interface SecretFiles {
  contextKey: string;
  apiKeys: string;
  apiKey: string;
  mrtrKeyring: string;
  ledgerKeyring: string;
}
export declare function secretFiles(dir: string): SecretFiles;
export declare function prepareSecrets(dir: string): Promise<SecretFiles>;
export declare function localEnvironments(o: TopologyOptions): Record<Component, Record<string, string>>;
export interface Topology {
  edgeUrl: string;
  apiKey: string;
  envs: Record<Component, Record<string, string>>;
  processes: Map<Component, ChildProcess>;
  log(c: Component): string;
  stop(c: Component): Promise<void>;
  start(c: Component): Promise<ChildProcess>;
  close(): Promise<void>;
}
export declare function startTopology(o: TopologyOptions & { onLine?: (c: Component, line: string) => void }): Promise<Topology>;
