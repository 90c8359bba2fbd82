import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** Where this run keeps its embedded-database template (test/support/data-dir-template.ts). */
    dataDirTemplateRoot: string;
  }
}

/**
 * One folder per run for the embedded-database template: made here, filled by the first test
 * that asks for it (most runs never do), removed when the run ends.
 */
export default function setup(project: TestProject): () => void {
  const root = mkdtempSync(join(tmpdir(), "chaos-core-test-template-"));
  project.provide("dataDirTemplateRoot", root);
  return () => rmSync(root, { recursive: true, force: true });
}
