/**
 * How a policy document names capabilities (docs/federation.md §5): one exact name
 * (`files.write_file`), or a pattern for every capability under a prefix (`files.*`: every tool of
 * the upstream `files`). No other wildcard form is taken — an ambiguous policy is denied rather
 * than guessed. The one matcher every rule uses (the policy-conditions issue reuses it).
 *
 * Precedence: where a list can deny, any entry that matches denies (a denial always wins);
 * where entries choose something (approval channels by capability), an exact name beats a
 * pattern, and among patterns the longer prefix wins.
 */

const SEGMENT = "[a-z][a-z0-9_]*";

/** A pattern: a capability-name prefix followed by `.*`. */
export const CAPABILITY_PATTERN_RE = new RegExp(`^${SEGMENT}(\\.${SEGMENT})*\\.\\*$`);

/** Whether an entry is a pattern (`files.*`) rather than one name. */
export function isCapabilityPattern(entry: string): boolean {
  return CAPABILITY_PATTERN_RE.test(entry);
}

/** Whether `entry` (a name or a pattern) names the capability `name`. */
export function entryMatches(entry: string, name: string): boolean {
  if (!isCapabilityPattern(entry)) return entry === name;
  return name.startsWith(entry.slice(0, -1));
}

/** The entry that names `name` most specifically, as {@link entryMatches} reads them. */
export interface CapabilityMatch {
  readonly entry: string;
  readonly exact: boolean;
}

/**
 * The most specific entry of `entries` naming `name`: the exact name if listed, else the pattern
 * with the longest prefix; undefined when none does.
 */
export function mostSpecificMatch(entries: Iterable<string>, name: string): CapabilityMatch | undefined {
  let best: string | undefined;
  for (const entry of entries) {
    if (entry === name) return { entry, exact: true };
    if (isCapabilityPattern(entry) && entryMatches(entry, name) && (best === undefined || entry.length > best.length)) best = entry;
  }
  return best === undefined ? undefined : { entry: best, exact: false };
}
