import { describe, expect, it } from "vitest";
import {
  TreeFrontier,
  assembleProof,
  consistencyProofPlan,
  inclusionProofPlan,
  type NodeId,
  consistencyProof,
  emptyRoot,
  hashLeaf,
  inclusionProof,
  rangeNodes,
  rootOf,
  subtreeHash,
  treeLevels,
  verifyConsistency,
  verifyInclusion,
} from "./merkle.js";

const hex = (s: string): Buffer => Buffer.from(s, "hex");

// RFC 6962 reference data, as published with transparency-dev/merkle (proof/verify_test.go):
// eight leaves, the root of every prefix, and known inclusion and consistency proofs.
const LEAVES = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"].map(hex);
const ROOTS = [
  "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
  "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
  "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
  "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
  "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
  "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
  "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
  "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
].map(hex);
/** Leaf numbers are 1-based, as in the reference data. */
const INCLUSION = [
  { leaf: 1, size: 8, proof: ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"] },
  { leaf: 6, size: 8, proof: ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"] },
  { leaf: 3, size: 3, proof: ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"] },
  { leaf: 2, size: 5, proof: ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"] },
];
const CONSISTENCY = [
  { from: 1, to: 8, proof: ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"] },
  { from: 6, to: 8, proof: ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"] },
  { from: 2, to: 5, proof: ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"] },
  { from: 6, to: 7, proof: ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"] },
];

const leafHashes = LEAVES.map(hashLeaf);

function flipBit(proof: Buffer[], i: number, mask = 0x08): Buffer[] {
  return proof.map((p, j) => (j === i ? Buffer.from(p.map((b, k) => (k === 0 ? b ^ mask : b))) : p));
}

/** Proofs over a tree whose levels are built once (the exported helpers rebuild them per call). */
function proverFor(leaves: Buffer[]) {
  const levels = treeLevels(leaves);
  const get = (id: NodeId) => subtreeHash(levels, id);
  return {
    inclusion: (i: number, n: number) => assembleProof(inclusionProofPlan(i, n), get),
    consistency: (m: number, n: number) => assembleProof(consistencyProofPlan(m, n), get),
  };
}

function leavesOf(n: number): Buffer[] {
  return Array.from({ length: n }, (_, i) => hashLeaf(Buffer.from(`leaf ${i}`)));
}

describe("RFC 6962 hashing against the reference vectors", () => {
  it("hashes leaves and the empty tree", () => {
    expect(emptyRoot().toString("hex")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect(hashLeaf(Buffer.alloc(0)).toString("hex")).toBe(ROOTS[0]!.toString("hex"));
  });

  it("computes the root of every prefix of the eight leaves", () => {
    for (let n = 1; n <= 8; n++) expect(rootOf(leafHashes, n).toString("hex"), `size ${n}`).toBe(ROOTS[n - 1]!.toString("hex"));
    expect(rootOf([]).equals(emptyRoot())).toBe(true);
  });

  it("generates and verifies the published inclusion proofs", () => {
    for (const v of INCLUSION) {
      const want = v.proof.map(hex);
      expect(inclusionProof(leafHashes, v.leaf - 1, v.size).map((b) => b.toString("hex"))).toEqual(v.proof);
      expect(verifyInclusion(v.leaf - 1, v.size, leafHashes[v.leaf - 1]!, want, ROOTS[v.size - 1]!)).toBe(true);
    }
    expect(inclusionProof(leafHashes, 0, 1)).toEqual([]);
  });

  it("generates and verifies the published consistency proofs", () => {
    for (const v of CONSISTENCY) {
      const want = v.proof.map(hex);
      expect(consistencyProof(leafHashes, v.from, v.to).map((b) => b.toString("hex"))).toEqual(v.proof);
      expect(verifyConsistency(v.from, v.to, ROOTS[v.from - 1]!, ROOTS[v.to - 1]!, want)).toBe(true);
    }
  });

  it("refuses the reference corruptions of an inclusion proof", () => {
    const some = hex("abacaba000000000000000000000000000000000000000000060061e00123456");
    for (const v of INCLUSION) {
      const proof = v.proof.map(hex);
      const root = ROOTS[v.size - 1]!;
      const leaf = leafHashes[v.leaf - 1]!;
      const i = v.leaf - 1;
      const bad: Array<[number, number, Buffer, Buffer[], Buffer]> = [
        [i - 1, v.size, leaf, proof, root],
        [i + 1, v.size, leaf, proof, root],
        [i ^ 2, v.size, leaf, proof, root],
        [i, v.size * 2, leaf, proof, root],
        [i, Math.floor(v.size / 2), leaf, proof, root],
        [i, v.size, Buffer.from("WrongLeaf"), proof, root],
        [i, v.size, leaf, proof, emptyRoot()],
        [i, v.size, leaf, proof, some],
        [i, v.size, leaf, [...proof, Buffer.alloc(0)], root],
        [i, v.size, leaf, [...proof, root], root],
        [i, v.size, leaf, [Buffer.alloc(0), ...proof], root],
        [i, v.size, leaf, [root, ...proof], root],
        [i, v.size, leaf, proof.slice(0, -1), root],
        ...proof.map((_, j): [number, number, Buffer, Buffer[], Buffer] => [i, v.size, leaf, flipBit(proof, j), root]),
      ];
      for (const [index, size, l, p, r] of bad) expect(verifyInclusion(index, size, l, p, r), `leaf ${v.leaf} of ${v.size}`).toBe(false);
    }
  });

  it("refuses the reference corruptions of a consistency proof", () => {
    for (const v of CONSISTENCY) {
      const proof = v.proof.map(hex);
      const r1 = ROOTS[v.from - 1]!;
      const r2 = ROOTS[v.to - 1]!;
      const bad: Array<[number, number, Buffer, Buffer, Buffer[]]> = [
        [v.from - 1, v.to, r1, r2, proof],
        [v.from + 1, v.to, r1, r2, proof],
        [v.from ^ 2, v.to, r1, r2, proof],
        [v.from, v.to * 2, r1, r2, proof],
        [v.from, Math.floor(v.to / 2), r1, r2, proof],
        [v.from, v.to, Buffer.from("WrongRoot"), r2, proof],
        [v.from, v.to, r1, Buffer.from("WrongRoot"), proof],
        [v.from, v.to, r2, r1, proof],
        [v.from, v.to, r1, r2, []],
        [v.from, v.to, r1, r2, [...proof, Buffer.alloc(0)]],
        [v.from, v.to, r1, r2, [...proof, r1]],
        [v.from, v.to, r1, r2, [...proof, r2]],
        [v.from, v.to, r1, r2, [Buffer.alloc(0), ...proof]],
        [v.from, v.to, r1, r2, [r1, ...proof]],
        [v.from, v.to, r1, r2, [r2, ...proof]],
        [v.from, v.to, r1, r2, [proof[0]!, ...proof]],
        [v.from, v.to, r1, r2, proof.slice(0, -1)],
        ...proof.map((_, j): [number, number, Buffer, Buffer, Buffer[]] => [v.from, v.to, r1, r2, flipBit(proof, j, 0x10)]),
      ];
      for (const [m, n, a, b, p] of bad) expect(verifyConsistency(m, n, a, b, p), `${v.from}→${v.to}`).toBe(false);
    }
  });

  it("treats empty and equal sizes as RFC 9162 does", () => {
    const r = ROOTS[0]!;
    expect(verifyConsistency(0, 0, r, r, [])).toBe(true);
    expect(verifyConsistency(0, 0, emptyRoot(), r, [])).toBe(false);
    expect(verifyConsistency(0, 5, r, ROOTS[4]!, [])).toBe(true);
    expect(verifyConsistency(0, 5, r, ROOTS[4]!, [r])).toBe(false);
    expect(verifyConsistency(3, 3, ROOTS[2]!, ROOTS[2]!, [])).toBe(true);
    expect(verifyConsistency(3, 3, ROOTS[2]!, ROOTS[3]!, [])).toBe(false);
    expect(verifyConsistency(3, 3, ROOTS[2]!, ROOTS[2]!, [r])).toBe(false);
    expect(verifyConsistency(2, 1, ROOTS[1]!, ROOTS[0]!, [])).toBe(false);
    expect(verifyInclusion(0, 0, leafHashes[0]!, [], emptyRoot())).toBe(false);
    expect(verifyInclusion(0, 1, leafHashes[0]!, [], leafHashes[0]!)).toBe(true);
    expect(verifyInclusion(0, 1, leafHashes[0]!, [], Buffer.alloc(0))).toBe(false);
  });
});

describe("Merkle properties over trees of 1..70 leaves", () => {
  const all = leavesOf(70);
  const prover = proverFor(all);

  // A root does not bind its size (a checkpoint signs both), so a wrong size is checked against
  // the root of that size: what a verifier holding a signed checkpoint would do.
  const roots = Array.from({ length: 72 }, (_, n) => rootOf(leavesOf(71), n));

  it("every leaf of every tree has a proof that verifies, and fails for a wrong index, size or bit", () => {
    for (let n = 1; n <= 70; n++) {
      const root = rootOf(all, n);
      for (let i = 0; i < n; i++) {
        const proof = prover.inclusion(i, n);
        expect(verifyInclusion(i, n, all[i]!, proof, root), `${i} of ${n}`).toBe(true);
        if (n > 1) expect(verifyInclusion((i + 1) % n, n, all[i]!, proof, root)).toBe(false);
        expect(verifyInclusion(i, n + 1, all[i]!, proof, roots[n + 1]!)).toBe(false);
        if (n > 1 && i < n - 1) expect(verifyInclusion(i, n - 1, all[i]!, proof, roots[n - 1]!)).toBe(false);
        expect(verifyInclusion(i, n, all[(i + 1) % 70]!, proof, root)).toBe(false);
        for (let j = 0; j < proof.length; j++) expect(verifyInclusion(i, n, all[i]!, flipBit(proof, j, 0x01), root)).toBe(false);
      }
    }
  });

  it("every pair of sizes m ≤ n is consistent, and fails for a wrong size, root or bit", () => {
    for (let n = 1; n <= 70; n++) {
      for (let m = 1; m <= n; m++) {
        const proof = prover.consistency(m, n);
        expect(verifyConsistency(m, n, roots[m]!, roots[n]!, proof), `${m}→${n}`).toBe(true);
        if (m === n) continue;
        expect(verifyConsistency(m, n, roots[m - 1]!, roots[n]!, proof)).toBe(false);
        expect(verifyConsistency(m, n, roots[m]!, roots[n - 1]!, proof)).toBe(false);
        if (m > 1) expect(verifyConsistency(m - 1, n, roots[m - 1]!, roots[n]!, proof)).toBe(false);
        expect(verifyConsistency(m, n + 1, roots[m]!, roots[n + 1]!, proof)).toBe(false);
        for (let j = 0; j < proof.length; j++) expect(verifyConsistency(m, n, roots[m]!, roots[n]!, flipBit(proof, j, 0x80))).toBe(false);
      }
    }
  });

  it("the frontier reports exactly the perfect subtrees and reproduces every root", () => {
    const frontier = new TreeFrontier();
    const nodes = new Map<string, string>();
    for (let n = 1; n <= 70; n++) {
      frontier.append(all[n - 1]!, (id, hash) => nodes.set(`${id.level}:${id.index}`, hash.toString("hex")));
      expect(frontier.root().equals(rootOf(all, n)), `size ${n}`).toBe(true);
      const resumed = new TreeFrontier(frontier.size, frontier.hashes);
      expect(resumed.root().equals(frontier.root())).toBe(true);
    }
    // 70 leaves + 35 + 17 + 8 + 4 + 2 + 1 complete subtrees above them.
    expect(nodes.size).toBe(70 + 35 + 17 + 8 + 4 + 2 + 1);
    const levels = treeLevels(all);
    for (const [key, hash] of nodes) {
      const [level, index] = key.split(":").map(Number);
      expect(subtreeHash(levels, { level: level!, index: index! }).toString("hex"), key).toBe(hash);
    }
    expect(rangeNodes(0, 70)).toEqual([
      { level: 6, index: 0 },
      { level: 2, index: 16 },
      { level: 1, index: 34 },
    ]);
  });

  it("refuses a frontier whose border does not match its size", () => {
    expect(() => new TreeFrontier(3, [all[0]!])).toThrow(RangeError);
    expect(() => new TreeFrontier(0, [all[0]!])).toThrow(RangeError);
  });
});
