// A long series of samples kept for the raw results: at most ~600 (every k-th, and the largest).

/** Every k-th sample and the one `size` finds largest, each written as `row` makes it. */
export function thinned<T, Row>(
  samples: readonly T[],
  size: (sample: T) => number,
  row: (sample: T) => Row,
): Row[] {
  const k = Math.max(1, Math.ceil(samples.length / 600));
  const max = samples.reduce<T | undefined>(
    (m, x) => (m === undefined || size(x) > size(m) ? x : m),
    undefined,
  );
  return samples.filter((x, i) => i % k === 0 || x === max).map(row);
}
