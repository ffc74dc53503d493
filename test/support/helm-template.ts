// The part of Helm's template language the chart's Deployment and ServiceAccount templates use,
// rendered as Helm renders it (helm is not on these machines): Go template actions with `{{-`/`-}}`
// trimming; if / else / with / range / end; `.Values...` fields; pipelines and parenthesised calls;
// Helm's functions toYaml (keys sorted, no trailing newline), nindent, indent, quote, join, len, gt,
// eq, and, or, not, dir, base, required and fail. Anything else is an error, never guessed: a
// template Pepr or the overlay changes past this subset fails the test that renders it.
import { posix } from "node:path";
import { stringify } from "yaml";

type Value = unknown;
type Node =
  | { text: string }
  | { print: string }
  | { block: "if" | "with" | "range"; expr: string; body: Node[]; otherwise: Node[] };

/** Helm's values: `override` merged into `defaults` (maps key by key, anything else replaced; null removes). */
export function mergeValues(defaults: Value, override: Value): Value {
  const isMap = (v: Value): v is Record<string, Value> =>
    v !== null && typeof v === "object" && !Array.isArray(v);
  if (!isMap(defaults) || !isMap(override)) return override === undefined ? defaults : override;
  const out: Record<string, Value> = { ...defaults };
  for (const [k, v] of Object.entries(override)) {
    if (v === null) delete out[k];
    else out[k] = mergeValues(defaults[k], v);
  }
  return out;
}

/** `template` rendered with `.Values` = values. */
export function renderTemplate(template: string, values: Value): string {
  return renderNodes(parse(template), { Values: values }, values);
}

function tokens(template: string): { text?: string; action?: string }[] {
  const out: { text?: string; action?: string }[] = [];
  let rest = template;
  while (rest) {
    const open = rest.indexOf("{{");
    if (open < 0) {
      out.push({ text: rest });
      break;
    }
    const close = rest.indexOf("}}", open);
    if (close < 0) throw new Error(`an action is not closed: ${rest.slice(open, open + 40)}`);
    let text = rest.slice(0, open);
    let action = rest.slice(open + 2, close);
    if (action.startsWith("-")) {
      text = text.replace(/\s+$/, "");
      action = action.slice(1);
    }
    rest = rest.slice(close + 2);
    if (action.endsWith("-")) {
      action = action.slice(0, -1);
      rest = rest.replace(/^\s+/, "");
    }
    out.push({ text }, { action: action.trim() });
  }
  return out;
}

function parse(template: string): Node[] {
  const root: Node[] = [];
  const stack: { nodes: Node[]; node?: Extract<Node, { block: string }> }[] = [{ nodes: root }];
  for (const { text, action } of tokens(template)) {
    const top = stack[stack.length - 1];
    if (text !== undefined) {
      if (text) top.nodes.push({ text });
      continue;
    }
    const [word] = action!.split(/\s+/);
    if (word === "if" || word === "with" || word === "range") {
      const node: Extract<Node, { block: string }> = {
        block: word,
        expr: action!.slice(word.length).trim(),
        body: [],
        otherwise: [],
      };
      top.nodes.push(node);
      stack.push({ nodes: node.body, node });
    } else if (word === "else") {
      if (!top.node) throw new Error("else outside a block");
      top.nodes = top.node.otherwise;
    } else if (word === "end") {
      if (stack.length < 2) throw new Error("end outside a block");
      stack.pop();
    } else if (action!.startsWith("/*")) {
      continue;
    } else top.nodes.push({ print: action! });
  }
  if (stack.length !== 1) throw new Error("a block is not ended");
  return root;
}

const truthy = (v: Value) =>
  !(
    v === undefined ||
    v === null ||
    v === false ||
    v === 0 ||
    v === "" ||
    (Array.isArray(v) && !v.length) ||
    (typeof v === "object" && !Array.isArray(v) && !Object.keys(v as object).length)
  );

function renderNodes(nodes: Node[], root: { Values: Value }, dot: Value): string {
  let out = "";
  for (const node of nodes) {
    if ("text" in node) out += node.text;
    else if ("print" in node) out += printed(evaluate(node.print, root, dot));
    else {
      const value = evaluate(node.expr, root, dot);
      if (node.block === "range") {
        const items = Array.isArray(value)
          ? value
          : truthy(value)
            ? Object.values(value as object)
            : [];
        out += items.length
          ? items.map(item => renderNodes(node.body, root, item)).join("")
          : renderNodes(node.otherwise, root, dot);
      } else if (truthy(value))
        out += renderNodes(node.body, root, node.block === "with" ? value : dot);
      else out += renderNodes(node.otherwise, root, dot);
    }
  }
  return out;
}

function printed(v: Value): string {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  if (v === undefined || v === null) return "<no value>";
  throw new Error(`printing ${JSON.stringify(v)}: Helm would print Go's map or slice syntax`);
}

const toYaml = (v: Value) =>
  stringify(v, { sortMapEntries: true, lineWidth: 0 }).replace(/\n$/, "");
const indent = (n: number, s: string) =>
  s
    .split("\n")
    .map(line => " ".repeat(n) + line)
    .join("\n");

const FUNCTIONS: Record<string, (...args: Value[]) => Value> = {
  toYaml,
  nindent: (n, s) => `\n${indent(n as number, String(s))}`,
  indent: (n, s) => indent(n as number, String(s)),
  quote: s => JSON.stringify(String(s ?? "")),
  join: (sep, list) => (list as Value[]).map(String).join(String(sep)),
  len: v =>
    Array.isArray(v) || typeof v === "string" ? v.length : Object.keys(v as object).length,
  gt: (a, b) => (a as number) > (b as number),
  eq: (a, b) => a === b,
  and: (...args) => args.find(a => !truthy(a)) ?? args[args.length - 1],
  or: (...args) => args.find(truthy) ?? args[args.length - 1],
  not: v => !truthy(v),
  dir: p => posix.dirname(String(p)),
  base: p => posix.basename(String(p)),
  required: (message, v) => {
    if (!truthy(v)) throw new Error(`helm: ${String(message)}`);
    return v;
  },
  fail: message => {
    throw new Error(`helm: ${String(message)}`);
  },
};

/** Words of an action: strings, parenthesised groups and bare words, `|` on its own. */
function words(expr: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < expr.length) {
    const c = expr[i];
    if (/\s/.test(c)) i++;
    else if (c === '"') {
      let j = i + 1;
      while (expr[j] !== '"') j += expr[j] === "\\" ? 2 : 1;
      out.push(expr.slice(i, j + 1));
      i = j + 1;
    } else if (c === "(") {
      let depth = 0;
      let j = i;
      for (; j < expr.length; j++) {
        if (expr[j] === "(") depth++;
        if (expr[j] === ")" && --depth === 0) break;
      }
      out.push(expr.slice(i, j + 1));
      i = j + 1;
    } else if (c === "|") {
      out.push("|");
      i++;
    } else {
      const m = /^[^\s|()]+/.exec(expr.slice(i))!;
      out.push(m[0]);
      i += m[0].length;
    }
  }
  return out;
}

function evaluate(expr: string, root: { Values: Value }, dot: Value): Value {
  const commands: string[][] = [[]];
  for (const w of words(expr)) {
    if (w === "|") commands.push([]);
    else commands[commands.length - 1].push(w);
  }
  let piped: Value[] = [];
  for (const [head, ...args] of commands) {
    if (head === undefined) throw new Error(`an empty command in {{ ${expr} }}`);
    const fn = FUNCTIONS[head];
    if (fn) piped = [fn(...args.map(a => operand(a, root, dot)), ...piped)];
    else if (!args.length && !piped.length) piped = [operand(head, root, dot)];
    else throw new Error(`{{ ${expr} }}: ${head} is no function this renderer knows`);
  }
  return piped[0];
}

function operand(word: string, root: { Values: Value }, dot: Value): Value {
  if (word.startsWith('"')) return JSON.parse(word);
  if (/^-?\d+$/.test(word)) return Number(word);
  if (word.startsWith("(")) return evaluate(word.slice(1, -1), root, dot);
  if (word === ".") return dot;
  if (word.startsWith(".Values")) {
    let v: Value = root.Values;
    for (const key of word.slice(".Values".length).split(".").filter(Boolean)) {
      // Helm: a missing key is nil, and a field of nil an error ("nil pointer evaluating").
      if (v === null || v === undefined) throw new Error(`${word}: nil pointer evaluating .${key}`);
      v = (v as Record<string, Value>)[key];
    }
    return v;
  }
  throw new Error(`${word}: no operand this renderer knows`);
}
