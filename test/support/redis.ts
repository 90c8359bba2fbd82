import { randomBytes } from "node:crypto";

/** The Redis tests use; each test picks its own key prefix, so runs never collide. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export function uniquePrefix(name: string): string {
  return `test:${name}:${randomBytes(4).toString("hex")}:`;
}
