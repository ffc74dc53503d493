// The watcher's front door, as lib/pepr/adapter.ts is the webhook's: the one Pepr Watch binding of
// capabilities/reports (Namespaces) calls this action, and a namespace whose labels or annotations
// changed has its objects judged again (its mode, its Pod Security level...). Pods and workloads do
// not come this way: the watcher lists and watches them itself (lib/reports/scan-watches.ts). Set
// up by pepr.ts; until then (and with reports off) the action does nothing.
import { createHash } from "node:crypto";
import type { KubernetesObject } from "kubernetes-fluent-client";
import type { FixEvents } from "./events";
import type { ReportScanner } from "./scanner";

let background: { scanner?: ReportScanner; events?: FixEvents } = {};

export function configureBackground(configured: typeof background): void {
  background = configured;
}

export function backgroundActions() {
  /** Namespace → a digest of its labels and annotations as last seen (annotations may be 256 KiB). */
  const seen = new Map<string, string>();
  return {
    // A named function: Pepr logs an action by its callback's name.
    onNamespace: function onNamespace(ns: KubernetesObject, phase: string): void {
      const name = ns?.metadata?.name;
      if (!name) return;
      // Gone: so are its objects (their own watches say so).
      if (phase === "DELETED") return void seen.delete(name);
      const now = createHash("sha1")
        .update(JSON.stringify([ns.metadata?.labels ?? {}, ns.metadata?.annotations ?? {}]))
        .digest("base64");
      if (seen.get(name) === now) return; // a status update: nothing the rules read
      seen.set(name, now);
      // Judged again after the scan's debounce (2 s): by then the namespace cache the rules read
      // (lib/cluster/live.ts, its own watch) has the change too. Nothing judged there yet: nothing.
      background.scanner?.rejudgeSoon(name);
    },
  };
}
