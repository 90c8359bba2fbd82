import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema, type Timestamp, type Value } from "@bufbuild/protobuf/wkt";
import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import type { MemoryItem } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import type { CapabilityContext } from "./capability.js";

// The limits the memory service enforces, mirrored so a bad step input is refused by the schema
// (naming the field) before policy is asked or the service is called. Same as the edge's tools.
export const KEY_MAX_CHARS = 512;
export const TAG_MAX_CHARS = 64;
export const MAX_TAGS = 32;

/** A memory key, as the memory service accepts it. */
export const keySchema = z.string().min(1).max(KEY_MAX_CHARS);
/** A tag list, as the memory service accepts it. */
export const tagsSchema = z.array(z.string().min(1).max(TAG_MAX_CHARS)).max(MAX_TAGS);
/** A time to live in whole seconds, as the memory service accepts it. */
export const ttlSecondsSchema = z.number().int().min(1).max(2 ** 32 - 1);

/** One memory item as capabilities return it: the shape of the edge's `chaoscore_recall` items. */
export const memoryItemOutput = z.object({
  key: z.string(),
  value: z.json().describe("The stored JSON value"),
  tags: z.array(z.string()),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
  expires_at: z.iso.datetime().optional().describe("Absent when the item never expires"),
});

export type MemoryItemOutput = z.output<typeof memoryItemOutput>;

function isoTime(ts: Timestamp | undefined): string | undefined {
  return ts ? timestampDate(ts).toISOString() : undefined;
}

/** A memory item from the service, as capabilities return it (snake_case, ISO times, plain JSON). */
export function memoryItemToOutput(item: MemoryItem): MemoryItemOutput {
  const expires = isoTime(item.expiresAt);
  return {
    key: item.key,
    value: item.value ? (toJson(ValueSchema, item.value) as MemoryItemOutput["value"]) : null,
    tags: [...item.tags],
    created_at: isoTime(item.createdAt) ?? "",
    updated_at: isoTime(item.updatedAt) ?? "",
    ...(expires ? { expires_at: expires } : {}),
  };
}

/** A validated JSON input value as a protobuf Value. */
export function jsonToValue(value: unknown): Value {
  try {
    return fromJson(ValueSchema, value as JsonValue);
  } catch (err) {
    throw new ChaosError("invalid_argument", `value: not a JSON value (${(err as Error).message})`);
  }
}

/** What a memory write takes once its capability's schema accepted it. */
export interface StoreItemInput {
  readonly key: string;
  readonly value: unknown;
  readonly tags?: readonly string[] | undefined;
  readonly ttl_seconds?: number | undefined;
}

/**
 * Stores one item in the tenant's memory with the caller's context, replacing any item under its
 * key: the handler of both `memory.remember` and `memory.episode`.
 */
export async function storeItem(input: StoreItemInput, ctx: CapabilityContext): Promise<{ item: MemoryItemOutput }> {
  const res = await ctx.memory.remember(
    { key: input.key, value: jsonToValue(input.value), tags: [...(input.tags ?? [])], ttlSeconds: input.ttl_seconds ?? 0 },
    { ctx: ctx.call, signal: ctx.signal },
  );
  if (!res.item) throw new ChaosError("internal", "memory stored the item but returned none");
  return { item: memoryItemToOutput(res.item) };
}
