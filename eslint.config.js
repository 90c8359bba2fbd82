// @ts-check
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", "proto/gen/**", "data/**", "coverage/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
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
    // process.env is read only in config.ts files, the telemetry preload and tests/scripts.
    files: ["services/*/src/**/*.ts"],
    ignores: ["services/*/src/**/config.ts", "services/*/src/**/*.test.ts", "services/kit/src/telemetry/register.ts"],
    rules: {
      "no-restricted-properties": [
        "error",
        { object: "process", property: "env", message: "Read the environment only in config.ts." },
      ],
    },
  },
);
