export { EntitlementScanner, sourceFiles, workspacePaths } from "./scanner.js";
export type { DefinitionSite, ScannerOptions, ScanResult } from "./scanner.js";
export { isHighEntropyLiteral, shannonEntropy } from "./rules.js";
