// Types for cluster-key-slot (ioredis's own Redis Cluster slot function; the package ships none).
declare module "cluster-key-slot" {
  /** The Redis Cluster hash slot (0–16383) of a key, honouring a `{hash tag}`. */
  export default function calculateSlot(key: string): number;
}
