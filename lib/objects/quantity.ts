// Exact Kubernetes quantities ("500m", "8Gi", "1e3") as BigInt milli-units, parsed, rounded and
// printed as k8s.io/apimachinery does. Pure.
// Why: docs/adr/0016-exact-quantities-as-kubernetes-computes.md

export type QuantityFormat = "DecimalSI" | "BinarySI" | "DecimalExponent";

/** A parsed quantity: its exact value in milli-units and the format it prints in. */
export interface Quantity {
  readonly milli: bigint;
  readonly format: QuantityFormat;
}

export class QuantityError extends Error {
  constructor(
    readonly input: unknown,
    readonly reason: string,
  ) {
    super(`${describeInput(input)} is not a Kubernetes quantity: ${reason}`);
    this.name = "QuantityError";
  }
}

function describeInput(input: unknown): string {
  if (typeof input === "string")
    return JSON.stringify(input.length > 40 ? `${input.slice(0, 40)}…` : input);
  if (typeof input === "number" || typeof input === "bigint") return String(input);
  return input === null ? "null" : typeof input;
}

/** Longest input accepted; real quantities are a few characters, this bounds the work on bad input. */
export const MAX_QUANTITY_LENGTH = 256;
/** Largest |exponent| of the `e` form; Kubernetes cannot represent anything near it either. */
export const MAX_EXPONENT = 1000;

const DECIMAL_SUFFIXES: Record<string, number> = {
  n: -9,
  u: -6,
  m: -3,
  "": 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
const BINARY_SUFFIXES: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const DECIMAL_BY_EXPONENT = new Map(Object.entries(DECIMAL_SUFFIXES).map(([s, e]) => [e, s]));
const BINARY_BY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/** Kubernetes caps a binary quantity at 2^63-1 units. */
const MAX_INT64 = 2n ** 63n - 1n;

//            sign     integer   fraction     suffix (checked below)
const SHAPE = /^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$/s;

const ceilDiv = (n: bigint, d: bigint): bigint => (n + d - 1n) / d; // n >= 0, d > 0

/**
 * Parses a quantity as the API server does. Accepts a string (surrounding whitespace is ignored, as
 * Kubernetes' JSON decoding does) or a finite number (YAML `cpu: 2`). Throws QuantityError.
 */
export function parseQuantity(input: unknown): Quantity {
  if (typeof input !== "string") return parseUncached(input);
  let q = parsed.get(input);
  if (!q) {
    q = Object.freeze(parseUncached(input));
    if (parsed.size >= PARSED_MAX) parsed.clear();
    parsed.set(input, q);
  }
  return q;
}

// The same few texts ("500m", "8Gi") come in every request and every quota: each distinct text is
// parsed once. Bounded, so that unique texts cannot grow it; Quantity is immutable (frozen).
const parsed = new Map<string, Quantity>();
const PARSED_MAX = 4096;

function parseUncached(input: unknown): Quantity {
  let text: string;
  if (typeof input === "string") text = input.trim();
  else if (typeof input === "number" && Number.isFinite(input)) text = String(input);
  else if (typeof input === "bigint") text = input.toString();
  else throw new QuantityError(input, 'expected a string such as "500m" or "8Gi"');
  if (text === "") throw new QuantityError(input, "empty");
  if (text.length > MAX_QUANTITY_LENGTH)
    throw new QuantityError(input, `longer than ${MAX_QUANTITY_LENGTH} characters`);

  const m = SHAPE.exec(text);
  if (!m) throw new QuantityError(input, "expected a number with an optional suffix");
  const [, sign, intDigits, fracDigits = "", suffix] = m;

  let format: QuantityFormat;
  let base: 10n | 2n;
  let exponent: number;
  if (Object.hasOwn(DECIMAL_SUFFIXES, suffix)) {
    format = "DecimalSI";
    base = 10n;
    exponent = DECIMAL_SUFFIXES[suffix];
  } else if (Object.hasOwn(BINARY_SUFFIXES, suffix)) {
    format = "BinarySI";
    base = 2n;
    exponent = BINARY_SUFFIXES[suffix];
  } else if (/^[eE][+-]?[0-9]+$/.test(suffix)) {
    format = "DecimalExponent";
    base = 10n;
    exponent = Number(suffix.slice(1));
    if (!Number.isSafeInteger(exponent) || Math.abs(exponent) > MAX_EXPONENT)
      throw new QuantityError(input, `exponent beyond ±${MAX_EXPONENT}`);
  } else {
    throw new QuantityError(
      input,
      `unknown suffix "${suffix}" (use n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or e<exponent>)`,
    );
  }

  // The digits as one integer and the power of ten that places the decimal point.
  const digits = BigInt((intDigits + fracDigits).replace(/^0+(?=.)/, "") || "0");
  let milli: bigint;
  if (base === 10n) {
    const shift = exponent + 3 - fracDigits.length;
    milli = shift >= 0 ? digits * 10n ** BigInt(shift) : ceilDiv(digits, 10n ** BigInt(-shift));
  } else {
    const scaled = digits * 2n ** BigInt(exponent) * 1000n;
    milli = ceilDiv(scaled, 10n ** BigInt(fracDigits.length));
    if (milli > MAX_INT64 * 1000n) milli = MAX_INT64 * 1000n;
  }
  if (sign === "-") milli = -milli;
  // A binary fraction below one unit prints as decimal; Kubernetes switches the format the same way.
  if (format === "BinarySI" && milli !== 0n && milli > -1000n && milli < 1000n)
    format = "DecimalSI";
  return { milli: milli === 0n ? 0n : milli, format };
}

/** parseQuantity without the exception: the error's message instead. */
export function safeParseQuantity(
  input: unknown,
): { ok: true; quantity: Quantity } | { ok: false; error: string } {
  try {
    return { ok: true, quantity: parseQuantity(input) };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) };
  }
}

/** The exact value in milli-units: "100m" → 100n, "1" → 1000n, "0.5Gi" → 536870912000n. */
export function toMilli(input: unknown): bigint {
  return parseQuantity(input).milli;
}

/**
 * Prints a value the way kubectl shows a stored quantity (Kubernetes' canonical form) in the given
 * format: "8Gi", "500m", "1500m", "1k", "1e3".
 */
export function formatQuantity(value: Quantity | bigint, format?: QuantityFormat): string {
  const milli = typeof value === "bigint" ? value : value.milli;
  const fmt = format ?? (typeof value === "bigint" ? "DecimalSI" : value.format);
  if (milli === 0n) return "0";
  if (milli < 0n) return `-${formatQuantity(-milli, fmt)}`;

  if (fmt === "BinarySI" && milli >= 1024n * 1000n && milli % 1000n === 0n) {
    let units = milli / 1000n;
    let power = 0;
    while (power < BINARY_BY_POWER.length - 1 && units % 1024n === 0n) {
      units /= 1024n;
      power++;
    }
    return `${units}${BINARY_BY_POWER[power]}`;
  }

  // Decimal: mantissa × 10^exponent with exponent a multiple of 3, as large as possible.
  let mantissa = milli;
  let exponent = -3;
  while (mantissa % 1000n === 0n && (fmt === "DecimalExponent" || exponent < 18)) {
    mantissa /= 1000n;
    exponent += 3;
  }
  if (fmt === "DecimalExponent") return exponent === 0 ? `${mantissa}` : `${mantissa}e${exponent}`;
  return `${mantissa}${DECIMAL_BY_EXPONENT.get(exponent)}`;
}

/** The canonical form of a quantity string: canonicalQuantity("0.5Gi") === "512Mi". */
export function canonicalQuantity(input: unknown): string {
  return formatQuantity(parseQuantity(input));
}

/** Kubernetes' Add: the sum keeps the format of the first operand, unless that one is zero. */
export function addQuantities(a: Quantity, b: Quantity): Quantity {
  return { milli: a.milli + b.milli, format: a.milli === 0n ? b.format : a.format };
}

export function compareQuantities(a: Quantity | bigint, b: Quantity | bigint): -1 | 0 | 1 {
  const x = typeof a === "bigint" ? a : a.milli;
  const y = typeof b === "bigint" ? b : b.milli;
  return x < y ? -1 : x > y ? 1 : 0;
}
