// /etc/passwd and /etc/group as the runtime reads them, and what a hostile image can write into
// them: lines of 100,000 fields, lines of megabytes, names that are not names, more entries than
// any image has. Pure (lib/images/passwd.ts).
import {
  MAX_ENTRIES,
  MAX_LINE,
  parseGroup,
  parsePasswd,
  resolveUser,
} from "../../../lib/images/passwd";
import { passwdOf } from "../../support/layers";

const PASSWD = passwdOf("jovyan:1000:100:/home/jovyan", "ml:1002:1002:/home/ml");
const GROUP = "root:x:0:\nusers:x:100:jovyan\nml:x:1002:\ntrain:x:2000:ml\n";

describe("parsePasswd", () => {
  it("reads name, UID, GID and HOME of each line", () => {
    expect(parsePasswd(PASSWD)).toEqual([
      { name: "root", uid: 0, gid: 0, home: "/root" },
      { name: "nobody", uid: 65534, gid: 65534, home: "/nonexistent" },
      { name: "jovyan", uid: 1000, gid: 100, home: "/home/jovyan" },
      { name: "ml", uid: 1002, gid: 1002, home: "/home/ml" },
    ]);
  });

  it("skips a line of 100,000 fields, and one longer than MAX_LINE, and reads on", () => {
    const hostile = `evil:x:1:1::/h:/bin/sh${":x".repeat(100_000)}\nlong:x:5:5::/h:/bin/${"a".repeat(MAX_LINE)}\n`;
    expect(parsePasswd(hostile + PASSWD).map(e => e.name)).toEqual([
      "root",
      "nobody",
      "jovyan",
      "ml",
    ]);
  });

  it("skips lines whose numbers or names are not plausible", () => {
    const text = [
      "a:x:-1:0::/:/bin/sh",
      "b:x:99999999999:0::/:/bin/sh",
      "c:x:1:4294967295::/:/bin/sh",
      " spaced:x:1:1::/:/bin/sh",
      "+nis::::::",
      "extra:x:9:9::/e:/bin/sh:more",
      "ok:x:7:7::/h:/bin/sh",
      "windows:x:8:8::/w:/bin/sh\r",
    ].join("\n");
    expect(parsePasswd(text)).toEqual([
      { name: "ok", uid: 7, gid: 7, home: "/h" },
      { name: "windows", uid: 8, gid: 8, home: "/w" },
    ]);
  });

  it("keeps MAX_ENTRIES entries at most", () => {
    const text = Array.from(
      { length: MAX_ENTRIES + 50 },
      (_, i) => `u${i}:x:${i}:${i}::/:/bin/sh`,
    ).join("\n");
    expect(parsePasswd(text)).toHaveLength(MAX_ENTRIES);
  });
});

it("parseGroup reads name and GID, not the members", () => {
  expect(parseGroup(GROUP)).toEqual([
    { name: "root", gid: 0 },
    { name: "users", gid: 100 },
    { name: "ml", gid: 1002 },
    { name: "train", gid: 2000 },
  ]);
});

describe("resolveUser: USER as runc puts it in numbers", () => {
  const users = parsePasswd(PASSWD);
  const groups = parseGroup(GROUP);
  it.each([
    ["jovyan", { ok: true, uid: 1000, gid: 100, home: "/home/jovyan" }],
    ["ml:train", { ok: true, uid: 1002, gid: 2000, home: "/home/ml" }],
    ["ml:3000", { ok: true, uid: 1002, gid: 3000, home: "/home/ml" }],
    ["1000:train", { ok: true, uid: 1000, gid: 2000, home: "/home/jovyan" }],
    ["4242:train", { ok: true, uid: 4242, gid: 2000 }],
    ["ml:", { ok: true, uid: 1002, gid: 1002, home: "/home/ml" }],
  ])("%s", (user, expected) => {
    expect(resolveUser(user, users, groups)).toEqual(expected);
  });

  it.each([
    ["mlsvc", users, groups, `the image's /etc/passwd does not list "mlsvc"`],
    ["ml:nogroup", users, groups, `the image's /etc/group does not list "nogroup"`],
    ["ml", undefined, groups, "the image has no /etc/passwd"],
    ["ml:train", users, undefined, "the image has no /etc/group"],
  ])("%s with what the image has: a problem, named", (user, passwd, group, problem) => {
    expect(resolveUser(user, passwd, group)).toEqual({ ok: false, problem });
  });
});
