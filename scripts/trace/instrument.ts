// Bundle-time instrumentation of the module's own TypeScript: every function, method, accessor,
// constructor and arrow gets its body run through the trace hook (scripts/trace/recorder.ts),
//   function f(a) { body }   →   function f(a) { return __agTrace(7, () => { body }); }
//   async (a) => expr        →   async (a) => __agTrace(8, async () => expr)
// so each call is recorded with the call it came from, async ones included. The wrapping arrow
// keeps `this`, `arguments`, `super` and `await` meaning what they meant. Generators cannot be
// wrapped (their body runs at each next()): their first resumption is recorded, and what they call
// is attributed to their consumer. Runs after TypeScript's own transforms, on the JavaScript it
// emits, so parameter properties and class fields are already plain statements.
import { readFile } from "node:fs/promises";
import { relative, sep } from "node:path";
import type { Plugin } from "esbuild";
import ts from "typescript";

/** A traced function: where it is, and the name the output shows. */
export interface Site {
  /** Path from the repository root, with "/" separators. */
  file: string;
  /** `answer`, `SnapshotCluster.namespace`, `answer/arrow@42` for an anonymous one. */
  name: string;
  line: number;
}

export const HOOK = "__agTrace";
/** Set before the bundle's modules load: their top-level code calls traced functions already. */
export const PRELUDE = `globalThis.${HOOK} = Object.assign((site, body) => body(), { mark() {} });`;

/** The files of the module (never node_modules, scripts, tests or the CLI that only `check` runs). */
export function isModuleFile(root: string, path: string): boolean {
  const rel = relative(root, path).split(sep).join("/");
  if (rel.startsWith("..") || rel.includes("node_modules/") || rel.endsWith(".d.ts")) return false;
  return /^(capabilities|lib)\/.*\.ts$/.test(rel) || rel === "hello-pepr.ts" || rel === "pepr.ts";
}

/** An esbuild plugin instrumenting the module's files; each function found is appended to `sites`. */
export function tracePlugin(root: string, sites: Site[]): Plugin {
  return {
    name: "admission-guard-trace",
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, async args => {
        if (!isModuleFile(root, args.path)) return undefined;
        const file = relative(root, args.path).split(sep).join("/");
        const contents = instrument(await readFile(args.path, "utf8"), file, sites);
        // Loaded as TypeScript, as esbuild loads the rest: a re-export of a type TypeScript could
        // not elide on its own (isolated modules) is then tolerated, as it is unbundled.
        return { contents, loader: "ts" };
      });
    },
  };
}

type FunctionNode =
  | ts.FunctionDeclaration
  | ts.FunctionExpression
  | ts.ArrowFunction
  | ts.MethodDeclaration
  | ts.GetAccessorDeclaration
  | ts.SetAccessorDeclaration
  | ts.ConstructorDeclaration;

function isFunctionNode(node: ts.Node): node is FunctionNode {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node) ||
    ts.isConstructorDeclaration(node)
  );
}

/** One file's source as JavaScript, every function body wrapped; its functions appended to `sites`. */
export function instrument(source: string, file: string, sites: Site[]): string {
  return ts.transpileModule(source, {
    fileName: file,
    compilerOptions: {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      esModuleInterop: true,
    },
    transformers: { after: [context => sf => wrapFunctions(sf, context, file, sites)] },
  }).outputText;
}

function wrapFunctions(
  sf: ts.SourceFile,
  context: ts.TransformationContext,
  file: string,
  sites: Site[],
): ts.SourceFile {
  const f = context.factory;
  const parsed = ts.getOriginalNode(sf) as ts.SourceFile;

  const visit = (node: ts.Node): ts.Node => {
    const visited = ts.visitEachChild(node, visit, context);
    // Only functions written in the source: not the helpers TypeScript emits (an enum's IIFE).
    const written = ts.getOriginalNode(node);
    if (!isFunctionNode(visited) || !visited.body || written.pos < 0 || !isFunctionNode(written))
      return visited;
    const site =
      sites.push({
        file,
        name: nameOf(written),
        line: parsed.getLineAndCharacterOfPosition(written.getStart(parsed)).line + 1,
      }) - 1;
    return withBody(visited, wrapped(visited, visited.body, site));
  };

  const wrapped = (fn: FunctionNode, body: ts.ConciseBody, site: number): ts.ConciseBody => {
    const id = f.createNumericLiteral(site);
    if ("asteriskToken" in fn && fn.asteriskToken && ts.isBlock(body)) {
      const mark = f.createCallExpression(
        f.createPropertyAccessExpression(f.createIdentifier(HOOK), "mark"),
        undefined,
        [id],
      );
      return f.updateBlock(body, [f.createExpressionStatement(mark), ...body.statements]);
    }
    const isAsync = fn.modifiers?.some(m => m.kind === ts.SyntaxKind.AsyncKeyword);
    const inner = f.createArrowFunction(
      isAsync ? [f.createModifier(ts.SyntaxKind.AsyncKeyword)] : undefined,
      undefined,
      [],
      undefined,
      f.createToken(ts.SyntaxKind.EqualsGreaterThanToken),
      body,
    );
    const call = f.createCallExpression(f.createIdentifier(HOOK), undefined, [id, inner]);
    return ts.isBlock(body) ? f.createBlock([f.createReturnStatement(call)], true) : call;
  };

  // The function as written, but for its body: whatever its kind, each other part is kept.
  const withBody = (fn: FunctionNode, body: ts.ConciseBody): ts.Node =>
    ts.visitEachChild(fn, child => (child === fn.body ? body : child), context);

  return ts.visitEachChild(sf, visit, context);
}

const textOf = (name: ts.PropertyName | ts.BindingName): string =>
  ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isPrivateIdentifier(name)
    ? name.text
    : name.getText();

const classNameOf = (node: ts.Node): string =>
  ts.isClassLike(node) && node.name ? node.name.text : "(class)";

/** The name a reader would look for: the declaration's, else the binding it is assigned to. */
export function nameOf(fn: FunctionNode): string {
  if ((ts.isFunctionDeclaration(fn) || ts.isFunctionExpression(fn)) && fn.name) return fn.name.text;
  if (ts.isConstructorDeclaration(fn)) return `${classNameOf(fn.parent)}.constructor`;
  if (ts.isMethodDeclaration(fn) || ts.isGetAccessor(fn) || ts.isSetAccessor(fn)) {
    const owner = ts.isClassLike(fn.parent) ? `${classNameOf(fn.parent)}.` : "";
    const accessor = ts.isGetAccessor(fn) ? "get " : ts.isSetAccessor(fn) ? "set " : "";
    return `${owner}${accessor}${textOf(fn.name)}`;
  }
  let holder: ts.Node = fn.parent;
  while (
    ts.isParenthesizedExpression(holder) ||
    ts.isAsExpression(holder) ||
    ts.isSatisfiesExpression(holder) ||
    ts.isNonNullExpression(holder)
  )
    holder = holder.parent;
  if (ts.isVariableDeclaration(holder) && ts.isIdentifier(holder.name)) return holder.name.text;
  if (ts.isPropertyAssignment(holder)) return textOf(holder.name);
  if (ts.isPropertyDeclaration(holder))
    return `${classNameOf(holder.parent)}.${textOf(holder.name)}`;
  // Anonymous (a callback): named by where it is written, inside the nearest named function.
  const line = fn.getSourceFile().getLineAndCharacterOfPosition(fn.getStart()).line + 1;
  const anonymous = `${ts.isArrowFunction(fn) ? "arrow" : "function"}@${line}`;
  const enclosing = ts.findAncestor(fn.parent, isFunctionNode);
  return enclosing ? `${nameOf(enclosing)}/${anonymous}` : anonymous;
}
