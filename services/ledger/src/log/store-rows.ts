import { ChaosError, type Queryable } from "@chaos-core/kit";
import { leafData } from "./entry.js";
import { hashLeaf, type NodeId } from "./merkle.js";

/** pg returns int8 as text, PGlite as number or bigint. */
export function toInt(v: unknown): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new ChaosError("internal", `not a safe integer: ${String(v)}`);
  return n;
}

/** A stored tree border (hex hashes, largest subtree first, concatenated) as hashes. */
export function splitFrontier(hex: string): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < hex.length; i += 64) out.push(Buffer.from(hex.slice(i, i + 64), "hex"));
  return out;
}

/** Reads stored Merkle nodes; leaves (level 0) come from their entries' sigs. Keyed `level:index`. */
export async function readNodes(q: Queryable, tenant: string, ids: NodeId[]): Promise<Map<string, Buffer>> {
  const map = new Map<string, Buffer>();
  if (ids.length === 0) return map;
  const inner = ids.filter((i) => i.level > 0);
  // Leaves are not stored as nodes: their hash comes from the entry's sig.
  const leaves = ids.filter((i) => i.level === 0).map((i) => i.index + 1);
  const res = await q.query<{ level: number; idx: string | number; hash: string }>(
    `SELECT level, idx, encode(hash, 'hex') AS hash FROM ledger.nodes
      WHERE tenant_id = $1 AND (level, idx) IN (SELECT * FROM unnest($2::smallint[], $3::bigint[]))
     UNION ALL
     SELECT 0::smallint, seq - 1, sig FROM ledger.entries WHERE tenant_id = $1 AND seq = ANY($4::bigint[])`,
    [tenant, inner.map((i) => i.level), inner.map((i) => i.index), leaves],
    { name: "ledger_read_nodes" },
  );
  for (const r of res.rows) {
    const hash = r.level === 0 ? hashLeaf(leafData(r.hash)) : Buffer.from(r.hash, "hex");
    map.set(`${r.level}:${toInt(r.idx)}`, hash);
  }
  return map;
}

/** A getter over {@link readNodes}' map that fails on a missing node instead of guessing. */
export function nodeGetter(map: Map<string, Buffer>, tenant: string): (id: NodeId) => Buffer {
  return (id) => {
    const h = map.get(`${id.level}:${id.index}`);
    // A missing node means the tree tables were tampered with or lost: fail, never guess.
    if (!h) throw new ChaosError("internal", `ledger node ${id.level}:${id.index} of ${tenant} is missing`);
    return h;
  };
}
