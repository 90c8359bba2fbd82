import { hash } from "node:crypto";

/**
 * RFC 6962 / RFC 9162 Merkle tree hashing, proofs and their verification. Pure: no I/O.
 *
 * A tree of `n` leaves is addressed by perfect subtrees: node `{level, index}` covers leaves
 * `[index·2^level, (index+1)·2^level)`; level 0 holds the leaf hashes. Every hash a proof
 * needs is the root of a contiguous leaf range, and each such range is a short run of perfect
 * subtrees, so a store that keeps perfect subtrees answers any proof with O(log n) reads
 * ({@link inclusionProofPlan}, {@link consistencyProofPlan}).
 */

/** Size in bytes of every hash in the tree (SHA-256). */
export const HASH_SIZE = 32;

/** A perfect subtree: `level` 0 is a leaf, `index` counts subtrees of that level from the left. */
export interface NodeId {
  level: number;
  index: number;
}

/** SHA-256 of `prefix || parts…`, one-shot (a third cheaper than createHash per node, and the integrator hashes ~2 per entry). */
function sha256(prefix: number, ...parts: Uint8Array[]): Buffer {
  let length = 1;
  for (const p of parts) length += p.length;
  const bytes = Buffer.allocUnsafe(length);
  bytes[0] = prefix;
  let at = 1;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.length;
  }
  return hash("sha256", bytes, "buffer");
}

/** The hash of a leaf: SHA-256(0x00 || data). */
export function hashLeaf(data: Uint8Array): Buffer {
  return sha256(0x00, data);
}

/** The hash of an interior node: SHA-256(0x01 || left || right). */
export function hashChildren(left: Uint8Array, right: Uint8Array): Buffer {
  return sha256(0x01, left, right);
}

/** The root of the empty tree: SHA-256 of nothing. */
export function emptyRoot(): Buffer {
  return hash("sha256", new Uint8Array(0), "buffer");
}

/** 2^e as an exact number; sizes stay below 2^53, beyond the reach of 32-bit bit operators. */
function pow2(e: number): number {
  return 2 ** e;
}

/** Bit `bit` of a non-negative safe integer. */
function bitOf(n: number, bit: number): number {
  return Math.floor(n / pow2(bit)) % 2;
}

function isPowerOfTwo(n: number): boolean {
  while (n > 1 && n % 2 === 0) n /= 2;
  return n === 1;
}

function assertSize(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${what} must be a non-negative safe integer, got ${n}`);
}

/** The largest power of two strictly below `n` (n ≥ 2): RFC 6962's split point `k`. */
export function splitPoint(n: number): number {
  if (n < 2) throw new RangeError(`no split point below ${n}`);
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/**
 * The perfect subtrees whose right fold is RFC 6962's MTH of leaves `[begin, end)`, largest
 * first. Only ranges whose start is aligned to the range's own largest subtree have that
 * shape; every range in a proof or a tree prefix does, and anything else is a caller bug.
 */
export function rangeNodes(begin: number, end: number): NodeId[] {
  assertSize(begin, "begin");
  assertSize(end, "end");
  if (end < begin) throw new RangeError(`empty range [${begin}, ${end})`);
  const out: NodeId[] = [];
  let at = begin;
  let previous = Infinity;
  while (at < end) {
    let level = 0;
    while (at % pow2(level + 1) === 0 && at + pow2(level + 1) <= end) level++;
    if (level > previous) throw new RangeError(`[${begin}, ${end}) is not an RFC 6962 subtree range`);
    previous = level;
    out.push({ level, index: at / pow2(level) });
    at += pow2(level);
  }
  return out;
}

/** Folds perfect subtree hashes (largest first) into the hash of the range they cover. */
export function foldRange(hashes: readonly Uint8Array[]): Buffer {
  if (hashes.length === 0) return emptyRoot();
  let acc: Buffer = Buffer.from(hashes[hashes.length - 1]!);
  for (let i = hashes.length - 2; i >= 0; i--) acc = hashChildren(hashes[i]!, acc);
  return acc;
}

/** A proof to be assembled: each element is the fold of the listed perfect subtrees. */
export type ProofPlan = NodeId[][];

/**
 * The ranges of RFC 6962 `PATH(index, D[0:size])`, innermost sibling first, each as its
 * perfect subtrees.
 */
export function inclusionProofPlan(index: number, size: number): ProofPlan {
  assertSize(index, "index");
  assertSize(size, "size");
  if (index >= size) throw new RangeError(`leaf ${index} is not in a tree of size ${size}`);
  const ranges: Array<[number, number]> = [];
  const path = (m: number, begin: number, end: number): void => {
    const n = end - begin;
    if (n <= 1) return;
    const k = splitPoint(n);
    if (m < k) {
      path(m, begin, begin + k);
      ranges.push([begin + k, end]);
    } else {
      path(m - k, begin + k, end);
      ranges.push([begin, begin + k]);
    }
  };
  path(index, 0, size);
  return ranges.map(([b, e]) => rangeNodes(b, e));
}

/**
 * The ranges of RFC 6962 `PROOF(from, D[0:to])` (the consistency proof), each as its perfect
 * subtrees. Empty when `from` is 0 or equals `to`.
 */
export function consistencyProofPlan(from: number, to: number): ProofPlan {
  assertSize(from, "from");
  assertSize(to, "to");
  if (from > to) throw new RangeError(`cannot prove size ${from} consistent with the smaller size ${to}`);
  if (from === 0 || from === to) return [];
  const ranges: Array<[number, number]> = [];
  const sub = (m: number, begin: number, end: number, whole: boolean): void => {
    const n = end - begin;
    if (m === n) {
      if (!whole) ranges.push([begin, end]);
      return;
    }
    const k = splitPoint(n);
    if (m <= k) {
      sub(m, begin, begin + k, whole);
      ranges.push([begin + k, end]);
    } else {
      sub(m - k, begin + k, end, false);
      ranges.push([begin, begin + k]);
    }
  };
  sub(from, 0, to, true);
  return ranges.map(([b, e]) => rangeNodes(b, e));
}

/** Every distinct node a plan needs, so a store can fetch them in one query. */
export function planNodes(plan: ProofPlan): NodeId[] {
  const seen = new Map<string, NodeId>();
  for (const range of plan) for (const id of range) seen.set(`${id.level}:${id.index}`, id);
  return [...seen.values()];
}

/** Assembles a planned proof from node hashes looked up by `hashOf`. */
export function assembleProof(plan: ProofPlan, hashOf: (id: NodeId) => Uint8Array): Buffer[] {
  return plan.map((range) => foldRange(range.map(hashOf)));
}

/**
 * Every perfect subtree hash of an in-memory tree, level by level (`levels[0]` = leaves), for
 * trees that have no node store (tests, small tools). O(n) to build.
 */
export function treeLevels(leafHashes: readonly Uint8Array[]): Buffer[][] {
  const levels: Buffer[][] = [leafHashes.map((h) => Buffer.from(h))];
  for (let below = levels[0]!; below.length > 1; ) {
    const next: Buffer[] = [];
    for (let i = 0; i + 1 < below.length; i += 2) next.push(hashChildren(below[i]!, below[i + 1]!));
    levels.push(next);
    below = next;
  }
  return levels;
}

/** Looks a perfect subtree up in {@link treeLevels}; throws for one beyond the tree. */
export function subtreeHash(levels: readonly Buffer[][], id: NodeId): Buffer {
  const h = levels[id.level]?.[id.index];
  if (!h) throw new RangeError(`node ${id.level}:${id.index} is beyond the tree`);
  return h;
}

function checkedLevels(leafHashes: readonly Uint8Array[], size: number): Buffer[][] {
  assertSize(size, "size");
  if (size > leafHashes.length) throw new RangeError(`size ${size} exceeds the ${leafHashes.length} leaves`);
  return treeLevels(leafHashes.slice(0, size));
}

/** RFC 6962 MTH of the first `size` leaf hashes (all of them by default). */
export function rootOf(leafHashes: readonly Uint8Array[], size = leafHashes.length): Buffer {
  const levels = checkedLevels(leafHashes, size);
  return foldRange(rangeNodes(0, size).map((id) => subtreeHash(levels, id)));
}

/** The inclusion proof of leaf `index` in the tree of the first `size` leaf hashes. */
export function inclusionProof(leafHashes: readonly Uint8Array[], index: number, size = leafHashes.length): Buffer[] {
  const levels = checkedLevels(leafHashes, size);
  return assembleProof(inclusionProofPlan(index, size), (id) => subtreeHash(levels, id));
}

/** The consistency proof between the trees of the first `from` and `to` leaf hashes. */
export function consistencyProof(leafHashes: readonly Uint8Array[], from: number, to = leafHashes.length): Buffer[] {
  const levels = checkedLevels(leafHashes, to);
  return assembleProof(consistencyProofPlan(from, to), (id) => subtreeHash(levels, id));
}

function validHashes(hashes: readonly Uint8Array[]): boolean {
  return hashes.every((h) => h.length === HASH_SIZE);
}

/** Right-shifts both counters until `fn`'s lowest bit is set or it reaches 0 (RFC 9162). */
function shiftWhileEven(fn: number, sn: number): [number, number] {
  while (fn !== 0 && fn % 2 === 0) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return [fn, sn];
}

/**
 * The root an inclusion proof leads to (RFC 9162 §2.1.3.2), or `undefined` when the proof has
 * the wrong shape for `index` in a tree of `size` leaves.
 */
export function rootFromInclusionProof(
  index: number,
  size: number,
  leafHash: Uint8Array,
  proof: readonly Uint8Array[],
): Buffer | undefined {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return undefined;
  if (leafHash.length !== HASH_SIZE || !validHashes(proof)) return undefined;
  let fn = index;
  let sn = size - 1;
  let r: Buffer = Buffer.from(leafHash);
  for (const p of proof) {
    if (sn === 0) return undefined;
    if (fn % 2 === 1 || fn === sn) {
      r = hashChildren(p, r);
      if (fn % 2 === 0) [fn, sn] = shiftWhileEven(fn, sn);
    } else {
      r = hashChildren(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : undefined;
}

/** True when `proof` shows leaf `index` with hash `leafHash` is in the tree of `size` leaves with `root`. */
export function verifyInclusion(
  index: number,
  size: number,
  leafHash: Uint8Array,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): boolean {
  const got = rootFromInclusionProof(index, size, leafHash, proof);
  return got !== undefined && root.length === HASH_SIZE && got.equals(root);
}

/**
 * True when `proof` shows the tree of `from` leaves with `fromRoot` is a prefix of the tree of
 * `to` leaves with `toRoot` (RFC 9162 §2.1.4.2). Size 0 is a prefix of everything; equal sizes
 * need equal roots and an empty proof.
 */
export function verifyConsistency(
  from: number,
  to: number,
  fromRoot: Uint8Array,
  toRoot: Uint8Array,
  proof: readonly Uint8Array[],
): boolean {
  if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 0 || from > to) return false;
  if (!validHashes(proof)) return false;
  if (from === to) return proof.length === 0 && Buffer.from(fromRoot).equals(toRoot);
  if (from === 0) return proof.length === 0;
  if (proof.length === 0 || fromRoot.length !== HASH_SIZE || toRoot.length !== HASH_SIZE) return false;

  // A power-of-two first tree is itself a node of the second, so the proof leaves it out.
  const path = isPowerOfTwo(from) ? [fromRoot, ...proof] : [...proof];
  let [fn, sn] = [from - 1, to - 1];
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr: Buffer = Buffer.from(path[0]!);
  let sr: Buffer = Buffer.from(path[0]!);
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = hashChildren(c, fr);
      sr = hashChildren(c, sr);
      if (fn % 2 === 0) [fn, sn] = shiftWhileEven(fn, sn);
    } else {
      sr = hashChildren(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && fr.equals(fromRoot) && sr.equals(toRoot);
}

/**
 * The right border of a growing tree (a "compact range" from 0): one perfect subtree hash per
 * set bit of `size`, largest first. Appending a leaf merges equal-sized subtrees like a binary
 * counter and reports each perfect node it completes, so a store can persist exactly the
 * nodes that became final; the root is the fold of the border.
 */
export class TreeFrontier {
  private readonly border: Buffer[];
  private count: number;

  constructor(size = 0, border: readonly Uint8Array[] = []) {
    assertSize(size, "size");
    let bits = 0;
    for (let b = 0; pow2(b) <= size; b++) bits += bitOf(size, b);
    if (border.length !== bits || !validHashes(border)) {
      throw new RangeError(`a tree of size ${size} has ${bits} border hashes of ${HASH_SIZE} bytes, got ${border.length}`);
    }
    this.count = size;
    this.border = border.map((h) => Buffer.from(h));
  }

  /** Leaves appended so far. */
  get size(): number {
    return this.count;
  }

  /** The border hashes, largest subtree first (what a store persists to resume). */
  get hashes(): Buffer[] {
    return this.border.map((h) => Buffer.from(h));
  }

  /** Appends one leaf hash; calls `onNode` for the leaf and for every node it completes. */
  append(leafHash: Uint8Array, onNode?: (id: NodeId, hash: Buffer) => void): void {
    if (leafHash.length !== HASH_SIZE) throw new RangeError(`a leaf hash has ${HASH_SIZE} bytes, got ${leafHash.length}`);
    const leafIndex = this.count;
    let hash: Buffer = Buffer.from(leafHash);
    let level = 0;
    onNode?.({ level, index: leafIndex }, hash);
    while (bitOf(this.count, level) === 1) {
      hash = hashChildren(this.border.pop()!, hash);
      level++;
      onNode?.({ level, index: Math.floor(leafIndex / pow2(level)) }, hash);
    }
    this.border.push(hash);
    this.count++;
  }

  /** RFC 6962 MTH of the leaves appended so far. */
  root(): Buffer {
    return foldRange(this.border);
  }
}
