import fc from "fast-check";
import {
  addQuantities,
  canonicalQuantity,
  compareQuantities,
  formatQuantity,
  parseQuantity,
  QuantityError,
  safeParseQuantity,
  toMilli,
  type QuantityFormat,
} from "../../../lib/objects/quantity";

const Ki = 1024n;
const Mi = Ki * Ki;
const Gi = Mi * Ki;
const MAX_MILLI = (2n ** 63n - 1n) * 1000n;

describe("parseQuantity: exact milli-units", () => {
  it.each([
    // decimal SI
    ["100m", 100n],
    ["1", 1000n],
    ["0", 0n],
    ["8", 8000n],
    ["1k", 1_000_000n],
    ["16M", 16_000_000_000n],
    ["2G", 2_000_000_000_000n],
    ["1T", 10n ** 15n],
    ["1P", 10n ** 18n],
    ["1E", 10n ** 21n], // "E" alone is exa, not an exponent
    ["1500u", 2n], // 1.5m rounds up to 2m
    ["100n", 1n], // below a milli: rounded up, never to zero
    ["0.1m", 1n],
    // binary SI
    ["1Ki", 1024n * 1000n],
    ["8Gi", 8n * Gi * 1000n],
    ["16Gi", 16n * Gi * 1000n],
    ["1Ti", Gi * Ki * 1000n],
    ["1Ei", 2n ** 60n * 1000n],
    // fractions
    ["0.5Gi", 536870912n * 1000n],
    ["1.5Gi", 1536n * Mi * 1000n],
    ["1.5", 1500n],
    ["0.5", 500n],
    ["2.25", 2250n],
    [".5", 500n],
    ["5.", 5000n],
    ["1.G", 10n ** 12n],
    ["0.0001", 1n],
    ["1.0001", 1001n], // 1.0001 → 1000.1m → 1001m (up, not to nearest)
    ["0.3Ki", 307200n],
    // exponents
    ["1e3", 1_000_000n],
    ["1E3", 1_000_000n],
    ["1e+3", 1_000_000n],
    ["1e-3", 1n],
    ["12e6", 12n * 10n ** 9n],
    ["1.5e3", 1_500_000n],
    ["5e-1", 500n],
    // signs, zeros, whitespace
    ["+5", 5000n],
    ["-5", -5000n],
    ["-100m", -100n],
    ["-0.1m", -1n], // rounded away from zero, as Kubernetes does
    ["007", 7000n],
    ["  250m  ", 250n],
    ["1\n", 1000n],
    // odd forms the API server also accepts, all zero
    [".", 0n],
    ["+", 0n],
    ["-", 0n],
    ["Ki", 0n],
  ])("%p → %p milli", (input, milli) => {
    expect(parseQuantity(input).milli).toBe(milli);
  });

  it("adds milli-units without float drift: 100m + 200m = 300m", () => {
    const sum = addQuantities(parseQuantity("100m"), parseQuantity("200m"));
    expect(sum.milli).toBe(300n);
    expect(formatQuantity(sum)).toBe("300m");
  });

  it("0.5Gi is 536870912 bytes and 1e3 is 1000", () => {
    expect(toMilli("0.5Gi") / 1000n).toBe(536870912n);
    expect(toMilli("0.5Gi") % 1000n).toBe(0n);
    expect(toMilli("1e3")).toBe(toMilli("1000"));
  });

  it("takes numbers as YAML gives them (cpu: 2, cpu: 0.5)", () => {
    expect(parseQuantity(2).milli).toBe(2000n);
    expect(parseQuantity(0.5).milli).toBe(500n);
    expect(parseQuantity(1e21).milli).toBe(10n ** 24n);
    expect(parseQuantity(0.1 + 0.2).milli).toBe(301n); // the float is just above 0.3: rounded up
  });

  it("caps binary quantities at 2^63-1 units like Kubernetes", () => {
    expect(parseQuantity("8Ei").milli).toBe((2n ** 63n - 1n) * 1000n);
    expect(parseQuantity("7Ei").milli).toBe(7n * 2n ** 60n * 1000n);
  });

  it.each([
    ["", "empty"],
    ["   ", "empty"],
    ["abc", 'unknown suffix "abc"'],
    ["1 Gi", 'unknown suffix " Gi"'],
    ["1.2.3", 'unknown suffix ".3"'],
    ["1e", 'unknown suffix "e"'],
    ["1ki", 'unknown suffix "ki"'],
    ["1KI", 'unknown suffix "KI"'],
    ["1Ki3", 'unknown suffix "Ki3"'],
    ["1m3", 'unknown suffix "m3"'],
    ["1e1.5", 'unknown suffix "e1.5"'],
    ["+-1", "unknown suffix"],
    ["1e1001", "exponent beyond"],
    ["1".repeat(300), "longer than"],
    ["0x10", 'unknown suffix "x10"'],
    ["١٢", "unknown suffix"],
    ["1toString", 'unknown suffix "toString"'], // not an object property lookup
  ])("rejects %p with a clear error (%s)", (input, reason) => {
    expect(() => parseQuantity(input)).toThrow(QuantityError);
    expect(() => parseQuantity(input)).toThrow(reason);
    expect(() => parseQuantity(input)).toThrow("is not a Kubernetes quantity");
  });

  it.each([[NaN], [Infinity], [null], [undefined], [{}], [["1"]], [true]])(
    "rejects %p, never NaN",
    input => {
      const r = safeParseQuantity(input);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error).toMatch(/is not a Kubernetes quantity/);
    },
  );
});

describe("formatQuantity: kubectl's canonical form", () => {
  it.each([
    ["1.5", "1500m"],
    ["1000", "1k"],
    ["1500", "1500"],
    ["100", "100"],
    ["0.5", "500m"],
    ["300m", "300m"],
    ["1000m", "1"],
    ["2000000m", "2k"],
    ["8Gi", "8Gi"],
    ["8192Mi", "8Gi"],
    ["0.5Gi", "512Mi"],
    ["1.5Gi", "1536Mi"],
    ["1024", "1024"], // decimal input stays decimal
    ["1024Ki", "1Mi"],
    ["1025Ki", "1025Ki"],
    ["0.5Ki", "512"], // binary below 1024 prints as decimal
    ["1.1Ki", "1126400m"], // binary with a fraction prints as decimal
    ["1e3", "1e3"],
    ["1E3", "1e3"],
    ["1500e0", "1500"],
    ["5e-1", "500e-3"],
    ["12e6", "12e6"],
    ["100n", "1m"],
    ["1E", "1E"],
    ["1000E", "1000E"], // no suffix beyond E
    ["-1.5Gi", "-1536Mi"],
    ["-0", "0"],
    ["0Gi", "0"],
  ])("%p prints as %p", (input, printed) => {
    expect(canonicalQuantity(input)).toBe(printed);
  });

  it("prints a bare milli value as decimal SI", () => {
    expect(formatQuantity(5000n)).toBe("5");
    expect(formatQuantity(103000n)).toBe("103");
    expect(formatQuantity(16n * Gi * 1000n, "BinarySI")).toBe("16Gi");
  });
});

describe("quantities: properties", () => {
  const formats: QuantityFormat[] = ["DecimalSI", "BinarySI", "DecimalExponent"];
  const milliArb = fc.oneof(
    // Kubernetes caps binary quantities at 2^63-1 units: stay within int64 like real values.
    fc.bigInt({ min: -MAX_MILLI, max: MAX_MILLI }),
    // values on binary and decimal boundaries, where suffix choice is interesting
    fc
      .tuple(fc.bigInt({ min: 1n, max: 5000n }), fc.integer({ min: 0, max: 6 }))
      .map(([n, p]) => n * 1024n ** BigInt(p) * 1000n)
      .filter(m => m <= MAX_MILLI),
    fc
      .tuple(fc.bigInt({ min: 1n, max: 5000n }), fc.integer({ min: 0, max: 8 }))
      .map(([n, p]) => n * 10n ** BigInt(p)),
  );

  it("parse(format(x)) === x for every value and format (printing loses nothing)", () => {
    fc.assert(
      fc.property(milliArb, fc.constantFrom(...formats), (milli, format) => {
        const printed = formatQuantity(milli, format);
        expect(parseQuantity(printed).milli).toBe(milli);
      }),
      { numRuns: 2000 },
    );
  });

  it("canonical form is stable: parsing and printing a printed value again gives the same text", () => {
    fc.assert(
      fc.property(milliArb, fc.constantFrom(...formats), (milli, format) => {
        const once = formatQuantity(milli, format);
        expect(formatQuantity(parseQuantity(once).milli, format)).toBe(once);
        // Decimal forms re-parse to their own format, so they are canonical on their own.
        if (format === "DecimalSI") expect(canonicalQuantity(once)).toBe(once);
      }),
      { numRuns: 2000 },
    );
  });

  it("canonical form has no fractional digits and the largest decimal suffix", () => {
    fc.assert(
      fc.property(milliArb, milli => {
        const printed = formatQuantity(milli, "DecimalSI");
        expect(printed).toMatch(/^-?[0-9]+[mkMGTPE]?$/);
        // the largest suffix: the mantissa is not a multiple of 1000 unless already at E
        const mantissa = BigInt(printed.replace(/[^0-9-]/g, ""));
        if (!printed.endsWith("E") && milli !== 0n) expect(mantissa % 1000n).not.toBe(0n);
      }),
      { numRuns: 1000 },
    );
  });

  it("agrees with a float computation of number × suffix (to float precision)", () => {
    const suffixes: Array<[string, number]> = [
      ["", 1],
      ["m", 1e-3],
      ["k", 1e3],
      ["M", 1e6],
      ["G", 1e9],
      ["Ki", 1024],
      ["Mi", 1024 ** 2],
      ["Gi", 1024 ** 3],
      ["e2", 100],
      ["e-2", 0.01],
    ];
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 99999 }),
        fc.stringMatching(/^[0-9]{0,3}$/),
        fc.constantFrom(...suffixes),
        (int, frac, [suffix, factor]) => {
          const text = frac ? `${int}.${frac}${suffix}` : `${int}${suffix}`;
          const exact = parseQuantity(text).milli;
          const approx = Number(`${int}.${frac || "0"}`) * factor * 1000;
          // Rounded up to a milli, never more than one milli above the true value.
          expect(Number(exact)).toBeGreaterThanOrEqual(approx - Math.max(1e-6 * approx, 1e-6));
          expect(Number(exact)).toBeLessThanOrEqual(approx + 1 + 1e-9 * approx);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("sums are exact: adding n copies of a milli value equals n × the value", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 999 }), fc.integer({ min: 1, max: 50 }), (m, n) => {
        let sum = parseQuantity("0");
        for (let i = 0; i < n; i++) sum = addQuantities(sum, parseQuantity(`${m}m`));
        expect(sum.milli).toBe(BigInt(m * n));
        expect(compareQuantities(sum, BigInt(m * n))).toBe(0);
      }),
    );
  });

  it("never throws anything but QuantityError on arbitrary input", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.anything()), input => {
        try {
          const q = parseQuantity(input);
          expect(typeof q.milli).toBe("bigint");
        } catch (e) {
          expect(e).toBeInstanceOf(QuantityError);
        }
      }),
      { numRuns: 2000 },
    );
  });
});
