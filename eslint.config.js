// @ts-check
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", "proto/gen/**", "data/**", "coverage/**"] },
  // The entitlement scanner's fixtures are code written to evade it (eval, computed require): read, never run.
  { ignores: ["services/contracts/src/scanner/fixtures/**"] },
  // Code written to break each import rule once, for the test that shows every rule fires: read by the checker, never run.
  { ignores: ["test/fixtures/import-rules/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Plain JavaScript launchers run on Node.
    files: ["**/*.js", "**/*.mjs"],
    languageOptions: {
      globals: { process: "readonly", console: "readonly", URL: "readonly", setTimeout: "readonly", clearTimeout: "readonly", setInterval: "readonly", clearInterval: "readonly" },
    },
  },
  {
    // CommonJS configuration (dependency-cruiser's rules).
    files: ["**/*.cjs"],
    languageOptions: { sourceType: "commonjs", globals: { module: "writable", require: "readonly", __dirname: "readonly" } },
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },
  {
    rules: {
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-restricted-syntax": [
        "error",
        { selector: "ExportAllDeclaration", message: "Use explicit named exports (CONVENTIONS.md)." },
      ],
    },
  },
  {
    // process.env is parsed only in config.ts files; entry points (main.ts, cli.ts) hand it over.
    files: ["services/*/src/**/*.ts"],
    ignores: [
      "services/*/src/**/config.ts",
      "services/*/src/main.ts",
      "services/standalone/src/cli.ts",
      "services/*/src/**/*.test.ts",
      "services/*/src/test-support/**",
      "services/kit/src/telemetry/register.ts",
    ],
    rules: {
      "no-restricted-properties": [
        "error",
        { object: "process", property: "env", message: "Read the environment only in config.ts." },
      ],
    },
  },
);
