import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["services/*/src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: end-to-end files start real processes, so keep parallelism modest.
    maxWorkers: 2,
    // A folder for the embedded-database template that test/support/data-dir-template.ts fills.
    globalSetup: ["test/support/global-setup.ts"],
    // The workspace packages' built output (what `npm run build` wrote, and what every child
    // process runs) loads as Node loads it, not through Vite's transform and module runner: a
    // test file that imports @chaos-core/edge otherwise re-evaluates the whole build through
    // Vite, seconds per file. Sources (services/*/src) are still transformed.
    server: { deps: { external: [/\/(?:services\/[^/]+|proto)\/dist\//] } },
    reporters: ["default", "json"],
    outputFile: { json: "test-results/vitest.json" },
  },
});
