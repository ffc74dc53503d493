// A streaming tar reader for image layers: ustar headers, pax extended headers (path, linkpath,
// size, uid, gid) and GNU long names (././@LongLink), fed chunk by chunk and never holding more
// than one header block, one bounded extended header and what the caller asks to keep of a file.
// Our own, not tar-stream (in node_modules through @kubernetes/client-node): it buffers a pax or
// long-name header of whatever size the archive declares, and a layer is a registry's bytes.
// Why: docs/adr/0032-image-files-read-bounded.md

const BLOCK = 512;
/** A pax or GNU long-name header longer than this is not a real one: the archive is refused. */
export const MAX_EXTENDED_HEADER = 64 * 1024;
/** Longest path kept (PATH_MAX). */
export const MAX_PATH = 4096;

export type EntryType = "file" | "hardlink" | "symlink" | "directory" | "other";

export interface TarEntry {
  /** As the archive writes it ("./etc/passwd", "etc/"), not normalised. */
  name: string;
  type: EntryType;
  /** The link's target (symlink, hardlink). */
  linkname: string;
  size: number;
  uid: number;
  gid: number;
  /** Permission bits (and setuid/setgid/sticky): 0o7777 at most. */
  mode: number;
}

/** What the reader does with an entry's data: keep it (up to `keep` bytes) or skip it. */
export interface TarVisitor {
  /** Returns how many bytes of the data to keep (0: skip it all). */
  entry(e: TarEntry): number;
  /** The kept bytes of the last entry that asked for them (all of its data, or `keep` of it). */
  data(e: TarEntry, kept: Buffer, complete: boolean): void;
}

export class TarError extends Error {}

const GLOBAL: TarEntry = {
  name: "",
  type: "other",
  linkname: "",
  size: 0,
  uid: 0,
  gid: 0,
  mode: 0,
};

interface Pending {
  path?: string;
  linkpath?: string;
  size?: number;
  uid?: number;
  gid?: number;
}

type State =
  | { at: "header" }
  | { at: "extended"; kind: "pax" | "gnuName" | "gnuLink"; left: number; pad: number }
  | { at: "data"; entry: TarEntry; left: number; pad: number; keep: number }
  | { at: "end" };

/** A number field: octal (NUL/space padded), or base-256 when its first byte has the high bit. */
export function numberField(block: Buffer, start: number, length: number): number {
  const field = block.subarray(start, start + length);
  if (field[0] & 0x80) {
    // GNU base-256: big-endian, the first byte's top bit is the marker. Negative ones: refused.
    if (field[0] & 0x40) throw new TarError("a negative base-256 number");
    let value = field[0] & 0x3f;
    for (let i = 1; i < field.length; i++) {
      value = value * 256 + field[i];
      if (value > Number.MAX_SAFE_INTEGER) throw new TarError("a base-256 number over 2^53");
    }
    return value;
  }
  const text = field
    .toString("latin1")
    .replace(/[\0 ]+$/, "")
    .replace(/^[\0 ]+/, "");
  if (text === "") return 0;
  if (!/^[0-7]+$/.test(text)) throw new TarError("a number field that is not octal");
  return parseInt(text, 8);
}

const stringField = (block: Buffer, start: number, length: number) => {
  const field = block.subarray(start, start + length);
  const nul = field.indexOf(0);
  return field.subarray(0, nul < 0 ? length : nul).toString("utf8");
};

function checksumOk(block: Buffer): boolean {
  const stored = numberField(block, 148, 8);
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const byte = i >= 148 && i < 156 ? 0x20 : block[i];
    unsigned += byte;
    signed += byte > 127 ? byte - 256 : byte;
  }
  // Some old writers summed signed bytes.
  return stored === unsigned || stored === signed;
}

const TYPES: Record<string, EntryType> = {
  "0": "file",
  "\0": "file",
  "7": "file",
  "1": "hardlink",
  "2": "symlink",
  "5": "directory",
};

/** pax records ("30 path=some/long/name\n") → the keys the reader uses. */
export function parsePax(body: Buffer): Pending {
  const out: Pending = {};
  let at = 0;
  while (at < body.length) {
    const space = body.indexOf(0x20, at);
    if (space < 0 || space - at > 20) throw new TarError("a pax record without a length");
    const length = Number(body.toString("latin1", at, space));
    if (!Number.isInteger(length) || length <= space - at || at + length > body.length)
      throw new TarError("a pax record whose length is wrong");
    const record = body.subarray(space + 1, at + length - 1); // without the "\n"
    const eq = record.indexOf(0x3d);
    if (eq < 0) throw new TarError("a pax record without '='");
    const key = record.toString("utf8", 0, eq);
    const value = record.toString("utf8", eq + 1);
    const number = () => {
      if (!/^\d{1,15}$/.test(value)) throw new TarError(`a pax ${key} that is not a number`);
      return Number(value);
    };
    if (key === "path") out.path = value;
    else if (key === "linkpath") out.linkpath = value;
    else if (key === "size") out.size = number();
    else if (key === "uid") out.uid = number();
    else if (key === "gid") out.gid = number();
    at += length;
  }
  return out;
}

/**
 * Feed it the archive's bytes in any chunks with `push`; it calls the visitor per entry. Throws a
 * TarError on an archive it cannot read; `ended` once it saw the end-of-archive blocks.
 */
export class TarReader {
  private state: State = { at: "header" };
  private held: Buffer[] = [];
  private heldBytes = 0;
  private pending: Pending = {};
  private zeroBlocks = 0;
  private kept: Buffer[] = [];
  private keptBytes = 0;

  constructor(private readonly visitor: TarVisitor) {}

  get ended(): boolean {
    return this.state.at === "end";
  }

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && this.state.at !== "end") {
      const state = this.state;
      if (state.at === "data") {
        const take = Math.min(state.left, chunk.length - at);
        if (this.keptBytes < state.keep) {
          const part = chunk.subarray(at, at + Math.min(take, state.keep - this.keptBytes));
          this.kept.push(Buffer.from(part)); // a copy: the chunk is not kept alive
          this.keptBytes += part.length;
        }
        state.left -= take;
        at += take;
        if (state.left === 0) {
          if (state.keep > 0) {
            this.visitor.data(
              state.entry,
              Buffer.concat(this.kept),
              this.keptBytes === state.entry.size,
            );
            this.kept = [];
            this.keptBytes = 0;
          }
          this.state = { at: "header" };
          this.skip(state.pad);
        }
        continue;
      }
      if (state.at === "header" && this.skipLeft > 0) {
        const take = Math.min(this.skipLeft, chunk.length - at);
        this.skipLeft -= take;
        at += take;
        continue;
      }
      // A header block, or an extended header's body: gathered whole (both bounded).
      const want = state.at === "header" ? BLOCK : state.left + state.pad;
      const take = Math.min(want - this.heldBytes, chunk.length - at);
      this.held.push(chunk.subarray(at, at + take));
      this.heldBytes += take;
      at += take;
      if (this.heldBytes < want) {
        // Copies of what is held, so that the caller's chunk is not kept alive.
        this.held = [Buffer.concat(this.held)];
        continue;
      }
      const whole = Buffer.concat(this.held);
      this.held = [];
      this.heldBytes = 0;
      if (state.at === "header") this.header(whole);
      else this.extended(state.kind, whole.subarray(0, state.left));
    }
  }

  private skipLeft = 0;
  private skip(n: number): void {
    this.skipLeft = n;
  }

  private extended(kind: "pax" | "gnuName" | "gnuLink", body: Buffer): void {
    if (kind === "pax") Object.assign(this.pending, parsePax(body));
    else {
      const nul = body.indexOf(0);
      const text = body.toString("utf8", 0, nul < 0 ? body.length : nul);
      if (kind === "gnuName") this.pending.path = text;
      else this.pending.linkpath = text;
    }
    this.state = { at: "header" };
  }

  private header(block: Buffer): void {
    if (block.every(b => b === 0)) {
      // Two zero blocks end the archive; one alone is tolerated (some writers stop there).
      if (++this.zeroBlocks >= 2) this.state = { at: "end" };
      return;
    }
    this.zeroBlocks = 0;
    if (!checksumOk(block)) throw new TarError("a header whose checksum is wrong");
    const flag = String.fromCharCode(block[156]);
    const size = numberField(block, 124, 12);
    const pad = (BLOCK - (size % BLOCK)) % BLOCK;
    if (flag === "x" || flag === "g" || flag === "L" || flag === "K") {
      if (size > MAX_EXTENDED_HEADER)
        throw new TarError(`an extended header of ${size} bytes (over ${MAX_EXTENDED_HEADER})`);
      if (flag === "g") {
        // Global pax headers: nothing the reader uses; skipped.
        if (size > 0) this.state = { at: "data", entry: GLOBAL, left: size, pad, keep: 0 };
        return;
      }
      const kind = flag === "x" ? "pax" : flag === "L" ? "gnuName" : "gnuLink";
      if (size === 0) return;
      this.state = { at: "extended", kind, left: size, pad };
      return;
    }
    const entry = this.entryOf(block, TYPES[flag] ?? "other", size);
    this.pending = {};
    // Only regular files carry data that counts; other types' sizes are skipped as written.
    const asked = Math.max(0, this.visitor.entry(entry));
    const dataSize = entry.type === "file" || entry.type === "other" ? entry.size : 0;
    const keep = Math.min(dataSize, asked);
    const dataPad = (BLOCK - (dataSize % BLOCK)) % BLOCK;
    if (dataSize === 0) {
      if (asked > 0) this.visitor.data(entry, Buffer.alloc(0), true);
      return;
    }
    this.state = { at: "data", entry, left: dataSize, pad: dataPad, keep };
  }

  private entryOf(block: Buffer, type: EntryType, headerSize: number): TarEntry {
    const p = this.pending;
    const ustar = block.toString("latin1", 257, 262) === "ustar";
    const prefix = ustar ? stringField(block, 345, 155) : "";
    const short = stringField(block, 0, 100);
    const name = p.path ?? (prefix ? `${prefix}/${short}` : short);
    const linkname = p.linkpath ?? stringField(block, 157, 100);
    if (name.length > MAX_PATH || linkname.length > MAX_PATH)
      throw new TarError(`a path over ${MAX_PATH} characters`);
    return {
      name,
      type,
      linkname,
      size: p.size ?? headerSize,
      uid: p.uid ?? numberField(block, 108, 8),
      gid: p.gid ?? numberField(block, 116, 8),
      mode: numberField(block, 100, 8) & 0o7777,
    };
  }
}
