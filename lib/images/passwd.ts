// An image's /etc/passwd and /etc/group, parsed as the runtime reads them, bounded: a registry
// writes these bytes. Lines over MAX_LINE, lines without exactly the file's fields, and names or
// numbers that are not plausible are skipped; at most MAX_ENTRIES are kept. Pure.

/** The largest /etc/passwd or /etc/group read (real ones are a few KiB). */
export const MAX_ACCOUNT_FILE_BYTES = 1024 * 1024;
/** A longer line is skipped without being split. */
export const MAX_LINE = 4096;
/** Entries kept per file. */
export const MAX_ENTRIES = 10_000;

export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

export interface GroupEntry {
  name: string;
  gid: number;
}

const NAME = /^[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,255}\$?$/;
const ID = /^\d{1,10}$/;
/** The largest id the kernel takes ((uid_t)-1 means "none"). */
const MAX_ID = 4294967294;

/** Splits a line into exactly `count` fields, or undefined (a line with more is not read). */
function fields(line: string, count: number): string[] | undefined {
  const out: string[] = [];
  let from = 0;
  for (let i = 0; i < count - 1; i++) {
    const colon = line.indexOf(":", from);
    if (colon < 0) return undefined;
    out.push(line.slice(from, colon));
    from = colon + 1;
  }
  if (line.indexOf(":", from) >= 0) return undefined;
  out.push(line.slice(from));
  return out;
}

const id = (text: string) => (ID.test(text) && Number(text) <= MAX_ID ? Number(text) : undefined);

/** Each line of at most MAX_LINE characters, up to `limit` of them that `parse` accepts. */
function lines<T>(text: string, parse: (line: string) => T | undefined): T[] {
  const out: T[] = [];
  let from = 0;
  while (from < text.length && out.length < MAX_ENTRIES) {
    let end = text.indexOf("\n", from);
    if (end < 0) end = text.length;
    if (end - from <= MAX_LINE) {
      const entry = parse(text.slice(from, end).replace(/\r$/, ""));
      if (entry) out.push(entry);
    }
    from = end + 1;
  }
  return out;
}

/** `name:password:uid:gid:gecos:home:shell` lines. */
export function parsePasswd(text: string): PasswdEntry[] {
  return lines(text, line => {
    const f = fields(line, 7);
    if (!f || !NAME.test(f[0])) return undefined;
    const uid = id(f[2]);
    const gid = id(f[3]);
    if (uid === undefined || gid === undefined || f[5].length > 1024) return undefined;
    return { name: f[0], uid, gid, home: f[5] };
  });
}

/** `name:password:gid:members` lines (the members are not kept). */
export function parseGroup(text: string): GroupEntry[] {
  return lines(text, line => {
    const f = fields(line, 4);
    if (!f || !NAME.test(f[0])) return undefined;
    const gid = id(f[2]);
    return gid === undefined ? undefined : { name: f[0], gid };
  });
}

export type Resolved =
  | { ok: true; uid: number; gid?: number; home?: string }
  | { ok: false; problem: string };

/**
 * The config's `User` ("ml", "ml:ml", "1001:ml", "ml:100") in numbers, as runc resolves it: a
 * name from /etc/passwd (with its primary group and HOME), a group name from /etc/group.
 * `passwd`/`group` undefined: the file is not in the image.
 */
export function resolveUser(
  user: string,
  passwd: PasswdEntry[] | undefined,
  group: GroupEntry[] | undefined,
): Resolved {
  const colon = user.indexOf(":");
  const name = colon < 0 ? user : user.slice(0, colon);
  const groupName = colon < 0 ? undefined : user.slice(colon + 1);
  let uid = id(name);
  let gid: number | undefined;
  let home: string | undefined;
  const entry = passwd?.find(e => (uid === undefined ? e.name === name : e.uid === uid));
  if (uid === undefined) {
    if (!passwd) return { ok: false, problem: "the image has no /etc/passwd" };
    if (!entry) return { ok: false, problem: `the image's /etc/passwd does not list "${name}"` };
    uid = entry.uid;
  }
  if (entry) {
    gid = entry.gid;
    home = entry.home || undefined;
  }
  if (groupName !== undefined && groupName !== "") {
    const numeric = id(groupName);
    if (numeric !== undefined) gid = numeric;
    else {
      if (!group) return { ok: false, problem: "the image has no /etc/group" };
      const g = group.find(e => e.name === groupName);
      if (!g) return { ok: false, problem: `the image's /etc/group does not list "${groupName}"` };
      gid = g.gid;
    }
  }
  return { ok: true, uid, gid, home };
}
