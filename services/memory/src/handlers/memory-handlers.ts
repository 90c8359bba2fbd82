import { fromJson, toJson, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate, ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import { ChaosError, type ServiceImpl } from "@chaos-core/kit";
import type { MemoryItemSchema, MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { exportHeaderLine, exportItemLine } from "../domain/export-format.js";
import type { MemoryItem, MemoryStore } from "../domain/memory-store.js";

// Handlers map proto <-> domain and nothing else: validation, limits and errors live in the
// store and domain, so the in-process and gRPC paths cannot drift apart.

function valueToJson(value: Value | undefined): unknown {
  // An unset Value reaches the store as undefined, which it refuses as "value is required".
  if (value === undefined || value.kind.case === undefined) return undefined;
  try {
    return toJson(ValueSchema, value);
  } catch (err) {
    // protobuf-es refuses NaN and Infinity, which a double on the wire can carry.
    throw new ChaosError("invalid_argument", `value is not valid JSON: ${(err as Error).message}`);
  }
}

function itemToProto(item: MemoryItem): MessageInitShape<typeof MemoryItemSchema> {
  return {
    key: item.key,
    value: fromJson(ValueSchema, item.value),
    tags: [...item.tags],
    createdAt: timestampFromDate(item.createdAt),
    updatedAt: timestampFromDate(item.updatedAt),
    ...(item.expiresAt ? { expiresAt: timestampFromDate(item.expiresAt) } : {}),
  };
}

/**
 * The gRPC surface of the memory service over a {@link MemoryStore}. The tenant is always the
 * verified one from the call context, never a request field.
 */
export function createMemoryHandlers(store: MemoryStore): ServiceImpl<typeof MemoryService> {
  return {
    async remember(req, ctx) {
      const item = await store.remember(ctx.call.tenant, {
        key: req.key,
        value: valueToJson(req.value),
        tags: req.tags,
        ttlSeconds: req.ttlSeconds,
      });
      return { item: itemToProto(item) };
    },

    async recall(req, ctx) {
      const item = await store.recall(ctx.call.tenant, req.key);
      return item ? { item: itemToProto(item) } : {};
    },

    async search(req, ctx) {
      const page = await store.search(ctx.call.tenant, {
        query: req.query,
        tags: req.tags,
        limit: req.limit,
        cursor: req.cursor,
      });
      return { items: page.items.map(itemToProto), nextCursor: page.nextCursor ?? "" };
    },

    async forget(req, ctx) {
      return { deleted: await store.forget(ctx.call.tenant, req.key) };
    },

    async stats(_req, ctx) {
      const stats = await store.stats(ctx.call.tenant);
      return {
        items: BigInt(stats.items),
        expired: BigInt(stats.expired),
        valueBytes: BigInt(stats.valueBytes),
        ...(stats.oldestUpdate ? { oldestUpdate: timestampFromDate(stats.oldestUpdate) } : {}),
        ...(stats.newestUpdate ? { newestUpdate: timestampFromDate(stats.newestUpdate) } : {}),
        topTags: stats.topTags.map((t) => ({ tag: t.tag, count: BigInt(t.count) })),
      };
    },

    async *exportData(_req, ctx) {
      const tenant = ctx.call.tenant;
      yield { line: exportHeaderLine(tenant) };
      for await (const item of store.exportItems(tenant)) yield { line: exportItemLine(tenant, item) };
    },

    async deleteData(_req, ctx) {
      const deleted = await store.deleteAll(ctx.call.tenant, { signal: ctx.signal });
      return { items: BigInt(deleted.items), episodes: BigInt(deleted.episodes), procedures: BigInt(deleted.procedures) };
    },

    async applyRetention(req, ctx) {
      const { deleted, cutoff } = await store.applyRetention(ctx.call.tenant, req.maxAgeSeconds, { signal: ctx.signal });
      return { deleted: BigInt(deleted), cutoff: timestampFromDate(cutoff) };
    },
  };
}
