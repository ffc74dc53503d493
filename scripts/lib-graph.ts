// The folder-level import graph of lib/ (issue 42): which lib/ folder imports which, read from the
// sources with TypeScript's own parser. `npm run lib-graph` prints it (`--runtime` leaves out
// `import type`, `--edges` names each import); test/unit/build/lib-layers.test.ts holds it to the
// order declared in lib/layers.json. Type imports count: a folder that names an upper folder's
// types cannot be read, tested or moved without it, erased at runtime or not.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";

export const ROOT = resolve(__dirname, "..");
const LIB = join(ROOT, "lib");

/** One import of one lib/ folder by another: the file, the module named, type-only or not. */
export interface Edge {
  from: string;
  to: string;
  file: string;
  specifier: string;
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap(entry => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** The modules a file names, and whether each is erased at runtime. */
function importsOf(file: string): { specifier: string; typeOnly: boolean }[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022);
  const found: { specifier: string; typeOnly: boolean }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const bindings = clause?.namedBindings;
      // `import type {...}`, or `import { type A, type B }` (nothing left to import at runtime).
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            bindings !== undefined &&
            ts.isNamedImports(bindings) &&
            bindings.elements.length > 0 &&
            bindings.elements.every(e => e.isTypeOnly)));
      found.push({ specifier: node.moduleSpecifier.text, typeOnly });
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      const clause = node.exportClause;
      const typeOnly =
        node.isTypeOnly ||
        (clause !== undefined &&
          ts.isNamedExports(clause) &&
          clause.elements.length > 0 &&
          clause.elements.every(e => e.isTypeOnly));
      found.push({ specifier: node.moduleSpecifier.text, typeOnly });
    } else if (
      ts.isCallExpression(node) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(node.expression) && node.expression.text === "require")) &&
      node.arguments.length === 1 &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      found.push({ specifier: node.arguments[0].text, typeOnly: false });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      const literal = node.argument.literal;
      if (ts.isStringLiteral(literal)) found.push({ specifier: literal.text, typeOnly: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The lib/ folder a path is in ("objects" for lib/objects/pod.ts), or undefined outside lib/. */
export function folderOf(path: string): string | undefined {
  const inLib = relative(LIB, path);
  if (inLib === "" || inLib.startsWith("..")) return undefined;
  // "../exemptions" names the folder itself (its index.ts).
  if (!inLib.includes(sep))
    return existsSync(path) && statSync(path).isDirectory() ? inLib : undefined;
  return inLib.split(sep)[0];
}

/** Every import from one lib/ folder into another (imports within a folder are not edges). */
export function libEdges(): Edge[] {
  const edges: Edge[] = [];
  for (const file of sourceFiles(LIB)) {
    const from = folderOf(file);
    if (from === undefined) continue;
    for (const { specifier, typeOnly } of importsOf(file)) {
      if (!specifier.startsWith(".")) continue;
      const to = folderOf(resolve(dirname(file), specifier));
      if (to === undefined || to === from) continue;
      edges.push({ from, to, file: relative(ROOT, file), specifier, typeOnly });
    }
  }
  return edges;
}

/** folder -> the folders it imports, sorted. */
export function folderGraph(edges: Edge[]): Map<string, string[]> {
  const graph = new Map<string, Set<string>>();
  for (const folder of readdirSync(LIB, { withFileTypes: true })) {
    if (folder.isDirectory()) graph.set(folder.name, new Set());
  }
  for (const { from, to } of edges) graph.get(from)?.add(to);
  return new Map([...graph].sort().map(([from, to]) => [from, [...to].sort()]));
}

/** The folders that import each other, directly or round a loop: strongly connected, of 2 or more. */
export function cycles(graph: Map<string, string[]>): string[][] {
  // Tarjan's algorithm; eleven folders, so recursion depth is no concern.
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) connect(v);
  return found;
}

/** lib/layers.json's order, bottom first. */
export function declaredOrder(): string[] {
  return (JSON.parse(readFileSync(join(LIB, "layers.json"), "utf8")) as { order: string[] }).order;
}

/** The imports the order forbids: of a folder at or above the importer's place (or not in it). */
export function againstTheOrder(edges: Edge[], order: readonly string[]): Edge[] {
  return edges.filter(e => {
    const from = order.indexOf(e.from);
    const to = order.indexOf(e.to);
    return from < 0 || to < 0 || to >= from;
  });
}

if (require.main === module) {
  const runtime = process.argv.includes("--runtime");
  const edges = libEdges().filter(e => !runtime || !e.typeOnly);
  const graph = folderGraph(edges);
  for (const [from, to] of graph) console.log(`${from} -> ${to.join(", ") || "(nothing)"}`);
  const loops = cycles(graph);
  console.log(
    loops.length === 0 ? "no cycle" : `cycles: ${loops.map(c => c.join(" <-> ")).join("; ")}`,
  );
  const against = againstTheOrder(edges, declaredOrder());
  console.log(`${against.length} import(s) against lib/layers.json's order`);
  if (process.argv.includes("--edges")) {
    for (const e of edges) {
      console.log(`${e.from} -> ${e.to}  ${e.file} ${e.specifier}${e.typeOnly ? " (type)" : ""}`);
    }
  }
}
