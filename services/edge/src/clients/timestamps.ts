import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";

/** A protobuf timestamp from a service's answer as ISO 8601, or undefined when unset. */
export function isoTime(ts: Timestamp | undefined): string | undefined {
  return ts ? timestampDate(ts).toISOString() : undefined;
}
