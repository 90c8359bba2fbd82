import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import ts from "typescript";
import { NO_ENTITLEMENTS, type Entitlements, type Gates } from "../contract.js";
import {
  APPROVAL_METHODS,
  CAPABILITY_RUNNERS,
  EXECUTOR_METHODS,
  FS_WRITES,
  GLOBAL_NETWORK,
  isHighEntropyLiteral,
  NODE_MODULES,
  PACKAGES,
  type Category,
} from "./rules.js";

/** What the scanner derived for one entry point: entitlements and gates. */
export interface ScanResult {
  readonly entitlements: Entitlements;
  readonly gates: Gates;
}

/** One definition site: `defineTool({...})` and the names it defines (a factory may define several). */
export interface DefinitionSite {
  readonly names: readonly string[];
  /** The file, relative to the root, with `/` separators. */
  readonly file: string;
  /** The function-valued member that runs (`run`, `handler`). */
  readonly entry: ts.Node;
}

export interface ScannerOptions {
  /** The repository root: module paths and evidence are relative to it. */
  readonly rootDir: string;
  /** The program's root files (absolute). */
  readonly files: readonly string[];
  /** Module specifiers mapped to source files (tsconfig `paths`, relative to rootDir). */
  readonly paths?: Readonly<Record<string, string[]>>;
}

/** Maps each workspace package's exports to its sources (`./dist/x.js` → `./src/x.ts`), so calls are followed into code, not declarations. */
export function workspacePaths(rootDir: string): Record<string, string[]> {
  const root = JSON.parse(readFileSync(join(rootDir, "package.json"), "utf8")) as { workspaces?: string[] };
  const out: Record<string, string[]> = {};
  for (const ws of root.workspaces ?? []) {
    const pkg = JSON.parse(readFileSync(join(rootDir, ws, "package.json"), "utf8")) as { name: string; exports?: Record<string, unknown> };
    for (const [sub, target] of Object.entries(pkg.exports ?? {})) {
      const file = typeof target === "string" ? target : ((target as Record<string, string>).default ?? "");
      if (!file.startsWith("./dist/")) continue;
      const spec = sub === "." ? pkg.name : `${pkg.name}/${sub.slice(2)}`;
      const src = file.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts");
      // proto's generated code is checked in under gen/, beside dist/gen.
      out[spec] = [join(ws, ws === "proto" ? src.replace(/^src\//, "") : src).split(sep).join("/")];
    }
  }
  return out;
}

/** Every `.ts` file under `dir` that is not a test. */
export function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== "node_modules" && e.name !== "dist" && e.name !== "test-support" && e.name !== "fixtures") out.push(...sourceFiles(p));
    } else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") && !e.name.endsWith(".d.ts")) out.push(p);
  }
  return out.sort();
}

class Reach {
  readonly flags = new Set<Category>();
  fsWrite = false;
  readonly methods = new Set<string>();
  readonly evasion = new Set<string>();
  readonly evidence = new Set<string>();
  readonly capabilities = new Set<string>();

  add(category: Category, api: string, file: string, write = false): void {
    this.flags.add(category);
    if (write) this.fsWrite = true;
    this.evidence.add(`${write ? "filesystemWrite" : category}: ${api} @ ${file}`);
  }

  result(): ScanResult {
    const methods = [...this.methods].sort();
    return {
      entitlements: {
        ...NO_ENTITLEMENTS,
        filesystem: this.flags.has("filesystem"),
        filesystemWrite: this.fsWrite,
        network: this.flags.has("network"),
        subprocess: this.flags.has("subprocess"),
        crypto: this.flags.has("crypto"),
        codeEvaluation: this.flags.has("codeEvaluation"),
        services: [...new Set(methods.map((m) => m.slice(0, m.indexOf("."))))].sort(),
        serviceMethods: methods,
        evasion: [...this.evasion].sort(),
        evidence: [...this.evidence].sort(),
      },
      gates: {
        capabilities: [...this.capabilities].sort(),
        executor: methods.some((m) => EXECUTOR_METHODS.has(m)),
        approvalPath: methods.some((m) => APPROVAL_METHODS.has(m)),
      },
    };
  }
}

const GLOBAL_OBJECTS: ReadonlySet<string> = new Set(["globalThis", "global", "window", "self"]);

/** The expression under parentheses, casts and non-null assertions. */
function unwrap(e: ts.Expression): ts.Expression {
  while (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isTypeAssertionExpression(e) || ts.isNonNullExpression(e) || ts.isSatisfiesExpression(e)) e = e.expression;
  return e;
}

const SERVICE_CLIENT = /^ServiceClient<\s*typeof\s+(\w+?)Service\s*>$/;

/**
 * Derives entitlements from source with the TypeScript compiler: from an entry point (a tool's
 * `run`) it follows every function, method and constant the code calls or references into the
 * workspace's own sources (across packages, through aliased imports and re-exports), and
 * classifies what it reaches outside them by the declaration the checker resolves: Node's
 * modules, global APIs, npm packages. Comments are never seen and string contents are never
 * matched as code. Calls through the project's typed service clients (`ServiceClient<typeof
 * XService>`) are recorded as the service they reach, not as network.
 */
export class EntitlementScanner {
  readonly program: ts.Program;
  private readonly checker: ts.TypeChecker;
  private readonly rootDir: string;

  constructor(options: ScannerOptions) {
    this.rootDir = options.rootDir;
    this.program = ts.createProgram([...options.files], {
      target: ts.ScriptTarget.ES2023,
      lib: ["lib.es2023.d.ts"],
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      skipLibCheck: true,
      noEmit: true,
      allowJs: false,
      types: ["node"],
      baseUrl: options.rootDir,
      paths: options.paths ?? {},
    });
    this.checker = this.program.getTypeChecker();
  }

  private rel(file: string): string {
    return relative(this.rootDir, file).split(sep).join("/");
  }

  private isWorkspaceSource(file: string): boolean {
    return !file.includes("/node_modules/") && !file.endsWith(".d.ts");
  }

  /** Every `defineX({...})` call in the program's workspace sources, with the names it defines. */
  definitions(defineFunction: string, entryMember: string): DefinitionSite[] {
    const out: DefinitionSite[] = [];
    for (const sf of this.program.getSourceFiles()) {
      if (!this.isWorkspaceSource(sf.fileName)) continue;
      const visit = (n: ts.Node): void => {
        if (ts.isCallExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === defineFunction && n.arguments[0] && ts.isObjectLiteralExpression(n.arguments[0])) {
          const obj = n.arguments[0];
          const member = (name: string) => obj.properties.find((p) => p.name && ts.isIdentifier(p.name) && p.name.text === name);
          const nameProp = member("name");
          const entry = member(entryMember);
          if (!nameProp || !entry) throw new Error(`${this.rel(sf.fileName)}: ${defineFunction}({...}) without a name or ${entryMember} member`);
          const names = this.literalNames(nameProp);
          if (names.length === 0) {
            const { line } = sf.getLineAndCharacterOfPosition(nameProp.getStart());
            throw new Error(`${this.rel(sf.fileName)}:${line + 1}: the name of this ${defineFunction} is not a string literal type, so its contract cannot be matched to it`);
          }
          out.push({ names, file: this.rel(sf.fileName), entry });
        }
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
    return out;
  }

  private literalNames(prop: ts.ObjectLiteralElementLike): string[] {
    const at = ts.isPropertyAssignment(prop) ? prop.initializer : prop.name!;
    const type = ts.isShorthandPropertyAssignment(prop) ? this.checker.getTypeOfSymbolAtLocation(this.checker.getShorthandAssignmentValueSymbol(prop)!, prop) : this.checker.getTypeAtLocation(at);
    const parts = type.isUnion() ? type.types : [type];
    return parts.every((t) => t.isStringLiteral()) ? parts.map((t) => (t as ts.StringLiteralType).value).sort() : [];
  }

  /** What the code reachable from `entry` may do. */
  scan(entry: ts.Node): ScanResult {
    const reach = new Reach();
    const seen = new Set<ts.Node>();
    const pending: ts.Node[] = [entry];
    while (pending.length > 0) {
      const node = pending.pop()!;
      if (seen.has(node)) continue;
      seen.add(node);
      this.walk(node, reach, (n) => pending.push(n));
    }
    return reach.result();
  }

  private walk(root: ts.Node, reach: Reach, follow: (n: ts.Node) => void): void {
    const file = this.rel(root.getSourceFile().fileName);
    const visit = (n: ts.Node): void => {
      if (ts.isCallExpression(n)) this.call(n, file, reach);
      if (ts.isNewExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === "Function" && this.isGlobal(n.expression)) {
        reach.add("codeEvaluation", "new Function", file);
        reach.evasion.add(`new-function @ ${file}`);
      }
      const target = ts.isElementAccessExpression(n) ? unwrap(n.expression) : undefined;
      if (ts.isElementAccessExpression(n) && target && ts.isIdentifier(target) && GLOBAL_OBJECTS.has(target.text)) {
        const arg = n.argumentExpression;
        if (!ts.isStringLiteralLike(arg)) reach.evasion.add(`computed-global @ ${file}`);
        else this.global(arg.text, n, file, reach);
      }
      if (ts.isPropertyAccessExpression(n) && ts.isIdentifier(n.expression) && GLOBAL_OBJECTS.has(n.expression.text)) {
        this.global(n.name.text, n, file, reach);
      }
      if ((ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n) || ts.isTemplateLiteralToken(n)) && isHighEntropyLiteral(n.text)) {
        reach.evasion.add(`high-entropy-literal @ ${file}`);
      }
      if (ts.isIdentifier(n)) this.reference(n, file, reach, follow);
      ts.forEachChild(n, visit);
    };
    visit(root);
  }

  private isGlobal(id: ts.Identifier): boolean {
    const sym = this.checker.getSymbolAtLocation(id);
    return !sym || (sym.declarations ?? []).every((d) => !this.isWorkspaceSource(d.getSourceFile().fileName));
  }

  private global(name: string, at: ts.Node, file: string, reach: Reach): void {
    if (GLOBAL_NETWORK.has(name)) reach.add("network", name, file);
    if (name === "eval" || name === "Function") {
      reach.add("codeEvaluation", name, file);
      reach.evasion.add(`${name === "eval" ? "eval" : "new-function"} @ ${file}`);
    }
    void at;
  }

  private call(n: ts.CallExpression, file: string, reach: Reach): void {
    const callee = n.expression;
    const arg0 = n.arguments[0];
    if (callee.kind === ts.SyntaxKind.ImportKeyword) {
      if (arg0 && ts.isStringLiteralLike(arg0)) this.moduleUse(arg0.text, "import()", file, reach);
      else reach.evasion.add(`computed-import @ ${file}`);
      return;
    }
    if (ts.isIdentifier(callee) && callee.text === "require" && this.isGlobal(callee)) {
      if (arg0 && ts.isStringLiteralLike(arg0)) this.moduleUse(arg0.text, "require()", file, reach);
      else reach.evasion.add(`computed-require @ ${file}`);
      return;
    }
    if (ts.isPropertyAccessExpression(callee) && callee.name.text === "fromCharCode" && ts.isIdentifier(callee.expression) && callee.expression.text === "String") {
      reach.evasion.add(`fromCharCode @ ${file}`);
    }
    if (ts.isPropertyAccessExpression(callee) && (callee.name.text === "createRequire")) {
      reach.evasion.add(`create-require @ ${file}`);
    }
    if (ts.isPropertyAccessExpression(callee)) {
      const service = this.serviceOf(callee.expression);
      if (service) reach.methods.add(`${service}.${callee.name.text}`);
    }
    const id = ts.isIdentifier(callee) ? callee : ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.name) ? callee.name : undefined;
    const runner = id && CAPABILITY_RUNNERS.find((r) => r.name === id.text);
    if (runner && !this.isGlobal(id)) {
      const arg = n.arguments[runner.argIndex];
      reach.capabilities.add(arg && ts.isStringLiteralLike(arg) ? arg.text : "(dynamic)");
    }
  }

  /** A literal import of a module: Node's built-ins by category; packages by the table. */
  private moduleUse(specifier: string, how: string, file: string, reach: Reach): void {
    const mod = specifier.replace(/^node:/, "");
    const category = NODE_MODULES[mod];
    if (category) reach.add(category, `${how} ${mod}`, file);
    const pkg = PACKAGES[specifier];
    if (pkg) reach.add(pkg.category, `${how} ${specifier}`, file, pkg.write ?? false);
  }

  /** The service a typed client reaches, from the declared type of the receiver (through aliases). */
  private serviceOf(receiver: ts.Expression): string | undefined {
    const sym = this.checker.getSymbolAtLocation(ts.isPropertyAccessExpression(receiver) ? receiver.name : receiver);
    for (const node of this.declaredTypes(sym)) {
      const found = this.serviceOfTypeNode(node, 0);
      if (found) return found;
    }
    // No declared type (an inferred variable): the alias the checker kept on the type.
    const alias = this.checker.getTypeAtLocation(receiver).aliasSymbol;
    const decl = alias?.declarations?.find(ts.isTypeAliasDeclaration);
    return decl ? this.serviceOfTypeNode(decl.type, 0) : undefined;
  }

  /** The type annotations of a symbol's declarations; for a destructured name, those of the property it came from. */
  private declaredTypes(sym: ts.Symbol | undefined): ts.TypeNode[] {
    const out: ts.TypeNode[] = [];
    for (const d of sym?.declarations ?? []) {
      const typeNode = (d as ts.Node & { type?: ts.TypeNode }).type;
      if (typeNode) out.push(typeNode);
      if (ts.isBindingElement(d) && ts.isObjectBindingPattern(d.parent)) {
        const prop = this.checker.getTypeAtLocation(d.parent).getProperty((d.propertyName ?? d.name).getText());
        for (const pd of prop?.declarations ?? []) {
          const t = (pd as ts.Node & { type?: ts.TypeNode }).type;
          if (t) out.push(t);
        }
      }
    }
    return out;
  }

  private serviceOfTypeNode(node: ts.TypeNode, depth: number): string | undefined {
    const m = SERVICE_CLIENT.exec(node.getText().replace(/\s+/g, " ").trim());
    if (m) return m[1]!.charAt(0).toLowerCase() + m[1]!.slice(1);
    if (depth >= 4 || !ts.isTypeReferenceNode(node)) return undefined;
    let sym = this.checker.getSymbolAtLocation(node.typeName);
    if (sym && sym.flags & ts.SymbolFlags.Alias) sym = this.checker.getAliasedSymbol(sym);
    const decl = sym?.declarations?.find(ts.isTypeAliasDeclaration);
    return decl ? this.serviceOfTypeNode(decl.type, depth + 1) : undefined;
  }

  /** An identifier in reached code: what it resolves to is followed (workspace) or classified (outside). */
  private reference(id: ts.Identifier, file: string, reach: Reach, follow: (n: ts.Node) => void): void {
    let sym = ts.isShorthandPropertyAssignment(id.parent) && id.parent.name === id ? this.checker.getShorthandAssignmentValueSymbol(id.parent) : this.checker.getSymbolAtLocation(id);
    if (!sym) return;
    if (sym.flags & ts.SymbolFlags.Alias) sym = this.checker.getAliasedSymbol(sym);
    for (const decl of sym.declarations ?? []) {
      const declFile = decl.getSourceFile().fileName;
      if (this.isWorkspaceSource(declFile)) {
        const body = followable(decl);
        if (body) follow(body);
        continue;
      }
      this.external(sym.name, decl, declFile, file, reach);
    }
  }

  private external(name: string, decl: ts.Declaration, declFile: string, file: string, reach: Reach): void {
    // Types, interfaces and option fields describe; only functions, classes, values and namespaces act.
    if (!USABLE.some((is) => is(decl))) return;
    const mod = enclosingModule(decl);
    if (mod !== undefined) {
      const m = mod.replace(/^node:/, "");
      const category = NODE_MODULES[m];
      if (category) {
        const write = category === "filesystem" && FS_WRITES.has(name.replace(/Sync$/, ""));
        // The module's own symbol (a namespace import) is a read; its functions say what they are.
        reach.add(category, ts.isSourceFile(decl) || ts.isModuleDeclaration(decl) ? m : `${m}.${name}`, file, write);
      }
      return;
    }
    const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(declFile)?.[1];
    if (pkg && PACKAGES[pkg]?.apis.includes(name)) {
      reach.add(PACKAGES[pkg].category, `${pkg}.${name}`, file, PACKAGES[pkg].write ?? false);
      return;
    }
    // A global declared by a lib or by @types/node outside any module.
    if (GLOBAL_NETWORK.has(name)) reach.add("network", name, file);
    if (name === "eval") {
      reach.add("codeEvaluation", "eval", file);
      reach.evasion.add(`eval @ ${file}`);
    }
  }
}

const USABLE: ReadonlyArray<(n: ts.Node) => boolean> = [
  ts.isFunctionDeclaration,
  ts.isVariableDeclaration,
  ts.isClassDeclaration,
  ts.isMethodDeclaration,
  ts.isMethodSignature,
  ts.isModuleDeclaration,
  ts.isSourceFile,
  ts.isExportAssignment,
];

/** The `declare module "x"` a declaration sits in, if any (how @types/node declares its modules). */
function enclosingModule(decl: ts.Node): string | undefined {
  for (let n: ts.Node | undefined = decl; n; n = n.parent) {
    if (ts.isModuleDeclaration(n) && ts.isStringLiteral(n.name)) return n.name.text;
  }
  return undefined;
}

/** The code a declaration in our sources runs when used: a function's body, a constant's initializer, a class. */
function followable(decl: ts.Declaration): ts.Node | undefined {
  if (ts.isFunctionDeclaration(decl) || ts.isMethodDeclaration(decl) || ts.isConstructorDeclaration(decl) || ts.isGetAccessor(decl) || ts.isSetAccessor(decl)) return decl.body;
  if (ts.isFunctionExpression(decl) || ts.isArrowFunction(decl)) return decl.body;
  if (ts.isVariableDeclaration(decl)) return decl.initializer;
  if (ts.isPropertyAssignment(decl)) return decl.initializer;
  if (ts.isShorthandPropertyAssignment(decl)) return undefined;
  if (ts.isClassDeclaration(decl) || ts.isClassExpression(decl)) return decl;
  if (ts.isPropertyDeclaration(decl)) return decl.initializer;
  return undefined;
}
