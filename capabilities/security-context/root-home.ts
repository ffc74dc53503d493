// An image whose interpreter or environment lives under /root (/root/miniconda3/bin on PATH, an
// entrypoint /root/.venv/bin/python): /root is mode 700, so the non-root UID the module runs it as
// cannot even start it, and no copy of WORKDIR helps. Said at admission, from the config alone.
// Pure. Why: docs/adr/0038-ml-image-shapes-from-the-config.md
import { rootPathDirs, underRoot } from "../../lib/images/config-shapes";
import { bounded } from "../../lib/images/limits";
import { asArray, asObject, type Obj } from "./checks/helpers";
import type { ImageUser } from "./image-user";

export const ROOT_HOME_FIX =
  "install it outside /root (e.g. /opt), or set USER in the image to the user it was built for, or set runAsUser: 0 only where the namespace's Pod Security level allows it";

/** The first word the container runs: its command, else the image's entrypoint, else args/Cmd. */
function programOf(
  container: Obj,
  user: ImageUser & { kind: "root" | "named" },
): string | undefined {
  const first = (list: unknown) => {
    const word = asArray(list)[0];
    return typeof word === "string" ? word : undefined;
  };
  if (Array.isArray(container.command)) return first(container.command);
  return user.shapes?.entrypoint ?? first(container.args) ?? user.shapes?.cmd;
}

/** What of the container lies under /root: PATH entries (the container's PATH wins) and its program. */
export function underRootOf(container: Obj, user: ImageUser | undefined): string[] {
  if (user?.kind !== "root" && user?.kind !== "named") return [];
  const own = asArray(container.env)
    .map(asObject)
    .find(e => e?.name === "PATH");
  const path =
    own === undefined ? (user.shapes?.rootPath ?? []) : rootPathDirs(String(own.value ?? ""));
  const said = path.length ? [`PATH ${bounded(path.join(":"))}`] : [];
  const program = programOf(container, user);
  if (program && underRoot(program)) said.push(`program ${bounded(program)}`);
  return said;
}

/** The warning (or the denial's message and fix), when the container's program is under /root. */
export function rootHomeWarning(
  user: ImageUser | undefined,
  container: Obj,
  uid: number,
): string | undefined {
  const said = underRootOf(container, user);
  if (!said.length || !user || user.kind === "unknown") return undefined;
  return `image "${user.image}" (container "${String(container.name ?? "")}") keeps its interpreter or environment under /root (${said.join("; ")}), which is mode 700: run as UID ${uid} it cannot start. Fix: ${ROOT_HOME_FIX}`;
}
