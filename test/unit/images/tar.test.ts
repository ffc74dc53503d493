// The streaming tar reader (lib/images/tar.ts) against archives GNU tar itself writes in each of
// its formats (ustar with a prefix, pax extended headers, GNU ././@LongLink), fed in every chunking,
// and against headers no honest tool writes: a wrong checksum, an extended header of 1 GiB, sizes
// in base-256.
import {
  MAX_EXTENDED_HEADER,
  numberField,
  parsePax,
  TarError,
  TarReader,
  type TarEntry,
} from "../../../lib/images/tar";
import { END, fileEntry, gnuTar, header, tarOf } from "../../support/layers";

interface Seen {
  entry: TarEntry;
  data?: string;
  complete?: boolean;
}

/** Reads an archive fed in chunks of `sizes` (cycled), keeping every file's data up to `keep`. */
function read(archive: Buffer, sizes: number[] = [archive.length], keep = 1 << 20) {
  const seen: Seen[] = [];
  const reader = new TarReader({
    entry(e) {
      seen.push({ entry: e });
      return e.type === "file" ? keep : 0;
    },
    data(e, kept, complete) {
      const last = seen[seen.length - 1];
      last.data = kept.toString("utf8");
      last.complete = complete;
    },
  });
  for (let at = 0, i = 0; at < archive.length; i++) {
    const size = Math.max(1, sizes[i % sizes.length]);
    reader.push(archive.subarray(at, at + size));
    at += size;
  }
  return { seen, ended: reader.ended };
}

const LONG_DIR = `opt/${"d".repeat(120)}/${"e".repeat(140)}`;
const FILES = [
  { path: "etc", uid: 0, gid: 0, mode: 0o755 },
  { path: "etc/passwd", content: "root:x:0:0:root:/root:/bin/sh\n", mode: 0o644 },
  { path: "etc/passwd-link", symlink: "passwd" },
  { path: "etc/passwd-hard", hardlink: "etc/passwd" },
  { path: "workspace", uid: 1001, gid: 100, mode: 0o2775 },
  { path: LONG_DIR, uid: 7, gid: 8 },
  { path: `${LONG_DIR}/file`, content: "x".repeat(1500), uid: 7, gid: 8 },
  { path: `${LONG_DIR}/link`, symlink: `/${"t".repeat(150)}/target` },
];

const byName = (seen: Seen[]) =>
  new Map(seen.map(s => [s.entry.name.replace(/^\.\//, "").replace(/\/$/, ""), s]));

describe.each(["pax", "gnu"] as const)("an archive GNU tar writes in %s format", format => {
  const archive = gnuTar(FILES, format);

  it("gives every entry with its name, type, owner, mode, link and data", () => {
    const { seen, ended } = read(archive);
    expect(ended).toBe(true);
    const entries = byName(seen);
    expect(entries.get("workspace")?.entry).toMatchObject({
      type: "directory",
      uid: 1001,
      gid: 100,
      mode: 0o2775,
    });
    expect(entries.get("etc/passwd")).toMatchObject({
      entry: { type: "file", uid: 0, mode: 0o644 },
      data: "root:x:0:0:root:/root:/bin/sh\n",
      complete: true,
    });
    expect(entries.get("etc/passwd-link")?.entry).toMatchObject({
      type: "symlink",
      linkname: "passwd",
    });
    // GNU tar writes the second name of a file as a hardlink to the first it packed.
    const hard = [entries.get("etc/passwd-hard")!, entries.get("etc/passwd")!].find(
      s => s.entry.type === "hardlink",
    );
    expect(hard?.entry.linkname.replace(/^\.\//, "")).toMatch(/^etc\/passwd(-hard)?$/);
    // Names and link targets past 100 (and 255) characters: pax records or ././@LongLink.
    expect(entries.get(`${LONG_DIR}/file`)).toMatchObject({
      entry: { type: "file", uid: 7, gid: 8, size: 1500 },
      data: "x".repeat(1500),
    });
    expect(entries.get(`${LONG_DIR}/link`)?.entry.linkname).toBe(`/${"t".repeat(150)}/target`);
    // No extended header shows up as an entry of its own.
    expect(seen.some(s => /LongLink|PaxHeaders/.test(s.entry.name))).toBe(false);
  });

  it("reads the same whatever the chunks: one byte, odd sizes, a block and a half", () => {
    const whole = read(archive).seen;
    for (const sizes of [[1], [7, 513, 3], [768], [511, 1, 1024]])
      expect(read(archive, sizes).seen).toEqual(whole);
  });
});

it("reads ustar names split into prefix and name", () => {
  const path = `${"p".repeat(90)}/${"q".repeat(40)}/name-of-the-file`;
  const { seen } = read(gnuTar([{ path, content: "ok" }], "ustar"));
  expect(byName(seen).get(path)?.data).toBe("ok");
});

it("keeps only what the visitor asks of a file, and says it is not complete", () => {
  const { seen } = read(
    tarOf(fileEntry("big", "a".repeat(5000)), fileEntry("after", "b")),
    [100],
    10,
  );
  expect(seen[0]).toMatchObject({ data: "a".repeat(10), complete: false });
  expect(seen[1]).toMatchObject({ entry: { name: "after" }, data: "b", complete: true });
});

it("refuses a header whose checksum is wrong", () => {
  const bad = fileEntry("etc/passwd", "x");
  bad[0] ^= 1;
  expect(() => read(tarOf(bad))).toThrow(TarError);
});

it("refuses a pax header or GNU long name over its bound before holding it", () => {
  for (const type of ["x", "L", "K"]) {
    // The header says 1 GiB and nothing follows: refused at the header, nothing gathered.
    const claim = header({ name: "././@LongLink", type, size: 1024 ** 3 });
    expect(() => read(claim)).toThrow(
      `extended header of ${1024 ** 3} bytes (over ${MAX_EXTENDED_HEADER})`,
    );
  }
});

it("streams past a file whose header says 1 GiB without keeping it", () => {
  const reader = new TarReader({ entry: () => 0, data: () => {} });
  reader.push(header({ name: "etc/passwd", size: 1024 ** 3 }));
  const chunk = Buffer.alloc(1024 * 1024, "a");
  for (let i = 0; i < 16; i++) reader.push(chunk);
  expect(reader.ended).toBe(false);
});

it("reads base-256 numbers and refuses negative ones", () => {
  const field = Buffer.alloc(12);
  field[0] = 0x80;
  field.writeUIntBE(8 * 1024 ** 3, 6, 6);
  expect(numberField(field, 0, 12)).toBe(8 * 1024 ** 3);
  field[0] = 0xff;
  expect(() => numberField(field, 0, 12)).toThrow(TarError);
});

it("parses pax records and refuses ones whose length is wrong", () => {
  const record = (k: string, v: string) => {
    const body = ` ${k}=${v}\n`;
    let n = Buffer.byteLength(body) + 1;
    while (Buffer.byteLength(`${n}${body}`) !== n) n++;
    return `${n}${body}`;
  };
  expect(
    parsePax(
      Buffer.from(record("path", "a/é/long") + record("uid", "1001") + record("mtime", "1.5")),
    ),
  ).toEqual({
    path: "a/é/long",
    uid: 1001,
  });
  expect(() => parsePax(Buffer.from("999 path=x\n"))).toThrow(TarError);
  expect(() => parsePax(Buffer.from(record("size", "-1")))).toThrow(TarError);
});

it("ends at two zero blocks and reads nothing after them", () => {
  const { seen, ended } = read(Buffer.concat([fileEntry("a", "1"), END, fileEntry("b", "2")]));
  expect(ended).toBe(true);
  expect(seen.map(s => s.entry.name)).toEqual(["a"]);
});
