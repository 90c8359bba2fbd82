import { z } from "zod";
import { defineTool } from "../../definitions/tool.js";
import { ledgerCall, ledgerOf, seqNumber } from "../../definitions/ledger-access.js";
import { entryOutput, requestSeq, toEntryOutput } from "./shapes.js";

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 200;
const treeSize = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

/** `inspect_audit_ledger`: the tenant's audit entries, the chain's verification, the signed checkpoint and proofs. */
export const inspectAuditLedgerTool = defineTool({
  name: "inspect_audit_ledger",
  toolset: "governance",
  title: "Inspect audit ledger",
  description:
    "Read this tenant's tamper-evident audit ledger: recent entries (newest first, or oldest first after after_seq), " +
    "whether the hash chain and the signed Merkle checkpoints verify (and the first bad entry if not), the latest " +
    "signed checkpoint with the public key that verifies it, and on request an RFC 6962 inclusion proof for one " +
    "entry or a consistency proof between two tree sizes. Read-only.",
  input: z.strictObject({
    limit: z.number().int().min(1).max(MAX_LIMIT).optional().describe(`Default ${DEFAULT_LIMIT}`),
    after_seq: z
      .number()
      .int()
      .min(0)
      .max(Number.MAX_SAFE_INTEGER)
      .optional()
      .describe("Oldest first from after this entry (0: the start); without it, newest first"),
    proof: z
      .strictObject({
        seq: requestSeq,
        tree_size: treeSize.optional().describe("Default: the latest checkpoint's"),
      })
      .optional()
      .describe("An inclusion proof for one entry"),
    consistency: z
      .strictObject({
        from_size: treeSize.describe("The smaller tree"),
        to_size: treeSize.optional().describe("The larger (default: the latest checkpoint's)"),
      })
      .optional()
      .describe("A consistency proof that the smaller tree is a prefix of the larger"),
  }),
  output: z.object({
    order: z.enum(["newest_first", "oldest_first"]),
    entries: z.array(entryOutput),
    size: z.number().int().describe("Entries in the tenant's log"),
    next_after_seq: z.number().int().optional().describe("Oldest first: after_seq of the next page"),
    chain: z
      .object({
        ok: z.boolean(),
        entries: z.number().int(),
        checkpoints: z.number().int(),
        first_bad_seq: z.number().int().optional().describe("The first entry that does not verify"),
        problem: z.string().optional(),
      })
      .describe("The hash chain and every signed checkpoint, recomputed"),
    checkpoint: z
      .object({
        note: z.string().describe("C2SP tlog-checkpoint signed note"),
        size: z.number().int(),
        root_hash: z.string().describe("Base64 RFC 6962 root"),
        verifier_key: z.string().describe("The C2SP note verifier key (public) that verifies the note"),
      })
      .optional()
      .describe("The latest signed checkpoint; absent while the log is empty"),
    inclusion_proof: z
      .object({
        seq: z.number().int(),
        leaf_index: z.number().int(),
        tree_size: z.number().int(),
        leaf_hash: z.string(),
        hashes: z.array(z.string()).describe("Base64, leaf to root"),
        root_hash: z.string(),
      })
      .optional(),
    consistency_proof: z
      .object({
        from_size: z.number().int(),
        to_size: z.number().int(),
        hashes: z.array(z.string()),
        from_root: z.string(),
        to_root: z.string(),
      })
      .optional(),
  }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, ctx) {
    const ledger = ledgerOf(ctx);
    const opts = ledgerCall(ctx);
    const limit = args.limit ?? DEFAULT_LIMIT;
    const newestFirst = args.after_seq === undefined;
    const [list, chain, checkpoint] = await Promise.all([
      ledger.listEntries({ afterSeq: BigInt(args.after_seq ?? 0), limit, newestFirst }, opts),
      ledger.verifyChain({}, opts),
      ledger.getCheckpoint({}, opts),
    ]);
    // Proofs without a size are made against the checkpoint this answer shows, so they verify
    // against its root: asked at the same time, "the latest checkpoint" could be another one
    // (the ledger integrates in the background).
    const anchor = checkpoint.checkpoint?.size ?? 0n;
    const [inclusion, consistency] = await Promise.all([
      args.proof
        ? ledger.getInclusionProof({ seq: BigInt(args.proof.seq), treeSize: args.proof.tree_size !== undefined ? BigInt(args.proof.tree_size) : anchor }, opts)
        : undefined,
      args.consistency
        ? ledger.getConsistencyProof(
            { fromSize: BigInt(args.consistency.from_size), toSize: args.consistency.to_size !== undefined ? BigInt(args.consistency.to_size) : anchor },
            opts,
          )
        : undefined,
    ]);
    const entries = list.entries.map(toEntryOutput);
    const last = entries.at(-1);
    const cp = checkpoint.checkpoint;
    return {
      order: newestFirst ? ("newest_first" as const) : ("oldest_first" as const),
      entries,
      size: seqNumber(list.size),
      ...(!newestFirst && entries.length === limit && last ? { next_after_seq: last.seq } : {}),
      chain: {
        ok: chain.ok,
        entries: seqNumber(chain.entries),
        checkpoints: seqNumber(chain.checkpoints),
        ...(chain.ok ? {} : { first_bad_seq: seqNumber(chain.firstBadSeq), problem: chain.problem }),
      },
      ...(cp ? { checkpoint: { note: cp.note, size: seqNumber(cp.size), root_hash: cp.rootHash, verifier_key: cp.verifierKey } } : {}),
      ...(inclusion && args.proof
        ? {
            inclusion_proof: {
              seq: args.proof.seq,
              leaf_index: seqNumber(inclusion.leafIndex),
              tree_size: seqNumber(inclusion.treeSize),
              leaf_hash: inclusion.leafHash,
              hashes: inclusion.hashes,
              root_hash: inclusion.rootHash,
            },
          }
        : {}),
      ...(consistency
        ? {
            consistency_proof: {
              from_size: seqNumber(consistency.fromSize),
              to_size: seqNumber(consistency.toSize),
              hashes: consistency.hashes,
              from_root: consistency.fromRoot,
              to_root: consistency.toRoot,
            },
          }
        : {}),
    };
  },
});
