import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["services/*/src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: end-to-end files start real processes, so keep parallelism modest.
    maxWorkers: 2,
    reporters: ["default", "json"],
    outputFile: { json: "test-results/vitest.json" },
  },
});
