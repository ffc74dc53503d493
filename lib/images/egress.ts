// Where image lookups may connect: a policy, not whatever a pod's image or a registry's redirect
// names. A host is reached only at addresses outside loopback, link-local, private, CGNAT,
// multicast, unspecified and reserved ranges (IPv6 forms that carry an IPv4 address judged by that
// address, or refused where its place is not fixed), and outside the
// admin's images.blockedCidrs (the cluster's Service and Pod ranges when they are public), unless
// an admin listed the host: images.allowedHosts, images.plainHttp, the registries of
// registries.allowed and of the mirror targets. Checked on the addresses DNS gave at connect time
// (a `lookup` handed to node:http/https, so a name that resolves again to another address is
// checked again), on every request: each redirect hop and the token realm alike. Plain HTTP goes
// only to images.plainHttp hosts.
import * as dns from "node:dns";
import * as http from "node:http";
import * as https from "node:https";
import { BlockList, isIP, isIPv4, type LookupFunction } from "node:net";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { parsePrefix } from "../objects/image-reference";
import { imageEgressRefused } from "../metrics";
import type { ImageLookupSettings } from "./settings";
import { bounded } from "./limits";

/** How the registry client makes a request (a fetch-like call; tests inject their own). */
export type Transport = (
  url: string | URL,
  init: {
    headers?: Record<string, string>;
    signal?: AbortSignal;
    method?: string;
    /** A request body (the cloud credential endpoints' POSTs). */
    body?: string;
  },
) => Promise<Response>;

export interface EgressPolicy {
  /** Hosts an admin listed, as a URL's `host` writes them ("harbor.internal", "10.0.0.5:5000"). */
  listed: ReadonlySet<string>;
  /** Hosts spoken to over plain HTTP (images.plainHttp), in the same form. */
  plainHttp: ReadonlySet<string>;
  /** Ranges never reached unless listed: the built-in ones and images.blockedCidrs. */
  blocked: BlockList;
  /** Resolves a name (dns.lookup unless a test injects one). */
  resolve?: typeof dns.lookup;
  /**
   * Only the listed hosts, nothing else (the cloud credentials' own policy): those endpoints are
   * the admin's, and a credential request never goes anywhere else.
   */
  onlyListed?: boolean;
}

/** The error a refused connection fails with (its code tells the client why). */
export const EGRESS_REFUSED = "ERR_ADMISSION_GUARD_EGRESS";

export class EgressRefused extends Error {
  readonly code = EGRESS_REFUSED;
}

// Every range of IANA's special-purpose registries that is not globally reachable, or that no
// registry serves from (documentation, benchmarking, deprecated), by RFC.
const BUILT_IN_BLOCKED: [string, number, "ipv4" | "ipv6"][] = [
  ["0.0.0.0", 8, "ipv4"], // "this network", unspecified
  ["10.0.0.0", 8, "ipv4"],
  ["100.64.0.0", 10, "ipv4"], // CGNAT
  ["127.0.0.0", 8, "ipv4"],
  ["169.254.0.0", 16, "ipv4"], // link-local: cloud metadata services
  ["172.16.0.0", 12, "ipv4"],
  ["192.0.0.0", 24, "ipv4"], // IETF protocol assignments
  ["192.0.2.0", 24, "ipv4"], // documentation
  ["192.88.99.0", 24, "ipv4"], // 6to4 relay anycast (RFC 7526: deprecated)
  ["192.168.0.0", 16, "ipv4"],
  ["198.18.0.0", 15, "ipv4"], // benchmarking
  ["198.51.100.0", 24, "ipv4"], // documentation
  ["203.0.113.0", 24, "ipv4"], // documentation
  ["224.0.0.0", 4, "ipv4"], // multicast
  ["240.0.0.0", 4, "ipv4"], // reserved, broadcast
  ["::", 96, "ipv6"], // unspecified, loopback, IPv4-compatible
  ["100::", 64, "ipv6"], // discard-only (RFC 6666)
  ["2001::", 23, "ipv6"], // IETF protocol assignments: Teredo 2001::/32 (IPv4 inside), ORCHID
  ["2001:db8::", 32, "ipv6"], // documentation
  ["3fff::", 20, "ipv6"], // documentation (RFC 9637)
  ["5f00::", 16, "ipv6"], // SRv6 SIDs (RFC 9602)
  ["fc00::", 7, "ipv6"], // unique local
  ["fe80::", 10, "ipv6"], // link-local
  ["fec0::", 10, "ipv6"], // site-local (RFC 3879: deprecated, still routed inside some sites)
  ["ff00::", 8, "ipv6"], // multicast
];

/** The built-in ranges plus the admin's CIDRs ("10.96.0.0/12", "fd00:10::/56"). */
export function blockListOf(extraCidrs: readonly string[] = []): BlockList {
  const list = new BlockList();
  for (const [net, prefix, type] of BUILT_IN_BLOCKED) list.addSubnet(net, prefix, type);
  for (const cidr of extraCidrs) {
    const parsed = parseCidr(cidr);
    if (parsed) list.addSubnet(parsed.network, parsed.prefix, parsed.type);
  }
  return list;
}

/** "10.96.0.0/12" → its parts; undefined when it is not a CIDR. */
export function parseCidr(
  cidr: string,
): { network: string; prefix: number; type: "ipv4" | "ipv6" } | undefined {
  const match = /^([^/]+)\/(\d{1,3})$/.exec(cidr.trim());
  if (!match) return undefined;
  const version = isIP(match[1]);
  const prefix = Number(match[2]);
  if (!version || prefix > (version === 4 ? 32 : 128)) return undefined;
  return { network: match[1], prefix, type: version === 4 ? "ipv4" : "ipv6" };
}

/** The eight 16-bit words of an IPv6 address (zone dropped); undefined when it is not one. */
function ipv6Words(address: string): number[] | undefined {
  let text = address.replace(/%.*$/, "");
  if (isIP(text) !== 6) return undefined;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1].split(".").map(Number);
    text =
      text.slice(0, -dotted[1].length) +
      `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const words = (s: string | undefined) => (s ? s.split(":").map(w => parseInt(w, 16)) : []);
  const front = words(head);
  const back = words(tail);
  return [...front, ...Array(8 - front.length - back.length).fill(0), ...back];
}

const v4Of = (high: number, low: number) => [high >> 8, high & 255, low >> 8, low & 255].join(".");
const zero = (words: number[]) => words.every(w => w === 0);

/**
 * The IPv4 address an IPv6 one carries where its form fixes where: IPv4-mapped ::ffff:0:0/96,
 * SIIT's IPv4-translated ::ffff:0:0:0/96, NAT64 64:ff9b::/96, 6to4 2002::/16. Forms whose IPv4 is
 * elsewhere or hidden (local-use NAT64, Teredo, IPv4-compatible) are refused whole instead.
 */
function embeddedIPv4(words: number[]): string | undefined {
  if (zero(words.slice(0, 5)) && words[5] === 0xffff) return v4Of(words[6], words[7]);
  if (zero(words.slice(0, 4)) && words[4] === 0xffff && words[5] === 0)
    return v4Of(words[6], words[7]);
  if (words[0] === 0x64 && words[1] === 0xff9b && zero(words.slice(2, 6)))
    return v4Of(words[6], words[7]);
  if (words[0] === 0x2002) return v4Of(words[1], words[2]);
  return undefined;
}

/** Whether an address may be connected to for a host no admin listed. */
export function addressAllowed(address: string, blocked: BlockList): boolean {
  if (isIPv4(address)) return !blocked.check(address, "ipv4");
  const words = ipv6Words(address);
  if (!words) return false;
  const v4 = embeddedIPv4(words);
  if (v4 !== undefined && blocked.check(v4, "ipv4")) return false;
  // 64:ff9b::/32 beyond the decoded /96 holds local-use NAT64, 64:ff9b:1::/48 (RFC 8215), whose
  // IPv4 sits where the operator chose: refused.
  if (v4 === undefined && words[0] === 0x64 && words[1] === 0xff9b) return false;
  // The IPv6 form is judged too, decoded or not: images.blockedCidrs may name it.
  return !blocked.check(words.map(w => w.toString(16)).join(":"), "ipv6");
}

/** The host form a URL gives ("registry-1.docker.io", "127.0.0.1:5000") of a registry. */
export const apiHost = (registry: string) =>
  registry === "docker.io" ? "registry-1.docker.io" : registry;

/** The policy the settings give (the webhook's, and `check --inspect-images`'s). */
export function egressPolicyOf(settings: ImageLookupSettings): EgressPolicy {
  const registryHosts = [
    ...settings.registries.allowed,
    ...Object.values(settings.registries.mirrors),
  ].flatMap(entry => {
    const parsed = parsePrefix(entry);
    return parsed.ok ? [parsed.prefix.registry] : [];
  });
  return egressPolicy({
    allowedHosts: [...settings.images.allowedHosts, ...registryHosts],
    plainHttp: settings.images.plainHttp,
    blockedCidrs: settings.images.blockedCidrs,
  });
}

/** A policy from its lists (hosts as registries write them: docker.io is its API host too). */
export function egressPolicy(lists: {
  allowedHosts?: readonly string[];
  plainHttp?: readonly string[];
  blockedCidrs?: readonly string[];
  resolve?: typeof dns.lookup;
}): EgressPolicy {
  // A URL's host leaves out the scheme's default port: "h:80" over http is "h".
  const plainHttp = (lists.plainHttp ?? []).map(h => h.toLowerCase().replace(/:80$/, ""));
  const listed = [
    ...(lists.allowedHosts ?? []).flatMap(h => [
      h.toLowerCase(),
      h.toLowerCase().replace(/:443$|:80$/, ""),
    ]),
    ...plainHttp,
  ];
  return {
    listed: new Set([...listed, ...listed.map(apiHost)]),
    plainHttp: new Set([...plainHttp, ...plainHttp.map(apiHost)]),
    blocked: blockListOf(lists.blockedCidrs),
    resolve: lists.resolve,
  };
}

/**
 * The cloud credentials' own policy: exactly the endpoints' hosts (the metadata address included,
 * which no image lookup may reach), plain HTTP only to those whose URL is http, nothing else.
 * Image lookups never use it. Why: docs/adr/0039-registry-credentials-from-the-cloud-identity.md
 */
export function credentialEgressPolicy(endpoints: readonly string[]): EgressPolicy {
  const urls = endpoints.map(e => new URL(e));
  return {
    ...egressPolicy({
      allowedHosts: urls.map(u => u.host),
      plainHttp: urls.filter(u => u.protocol === "http:").map(u => u.host),
    }),
    onlyListed: true,
  };
}

/** A `lookup` for net.connect that keeps only the addresses the policy allows. */
export function guardedLookup(host: string, policy: EgressPolicy): LookupFunction {
  const resolve = policy.resolve ?? dns.lookup;
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, "", 0);
      const allowed = (addresses as unknown as dns.LookupAddress[]).filter(a =>
        addressAllowed(a.address, policy.blocked),
      );
      if (!allowed.length) {
        imageEgressRefused.inc();
        return callback(
          new EgressRefused(
            `${bounded(host)} resolves only to addresses the egress policy refuses`,
          ),
          "",
          0,
        );
      }
      if (options.all) callback(null, allowed);
      else callback(null, allowed[0].address, allowed[0].family);
    });
  };
}

// Each policy has its own sockets: a connection checked under one policy is never reused under
// another (a pooled socket skips the lookup). Idle ones close after a while.
const AGENT_OPTIONS = { keepAlive: true, maxSockets: 16, maxTotalSockets: 64, timeout: 15_000 };
const transports = new WeakMap<EgressPolicy, Transport>();

/**
 * Why the policy refuses a URL before any connection (scheme, plain HTTP, an IP literal, which
 * net.connect dials without a lookup); undefined: connect, the lookup checks the rest.
 */
export function refusal(url: URL, policy: EgressPolicy): string | undefined {
  const host = url.host.toLowerCase();
  if (url.protocol !== "https:" && url.protocol !== "http:")
    return `${bounded(url.protocol)} is not http(s)`;
  if (policy.onlyListed && !policy.listed.has(host))
    return `${bounded(host)} is not a configured credential endpoint`;
  if (url.protocol === "http:" && !policy.plainHttp.has(host))
    return `plain HTTP to ${bounded(host)}, which is not in images.plainHttp`;
  if (policy.listed.has(host)) return undefined;
  const literal = url.hostname.replace(/^\[|\]$/g, "");
  if (isIP(literal) && !addressAllowed(literal, policy.blocked))
    return `${bounded(host)} is an address the egress policy refuses`;
  return undefined;
}

/**
 * Requests through node:http/https under the policy, answered as a web Response (the client's
 * shape). Redirects are never followed here: the client follows them, each hop through this.
 */
export function guardedTransport(policy: EgressPolicy): Transport {
  let transport = transports.get(policy);
  if (!transport) transports.set(policy, (transport = newTransport(policy)));
  return transport;
}

function newTransport(policy: EgressPolicy): Transport {
  const agents = {
    "http:": new http.Agent(AGENT_OPTIONS),
    "https:": new https.Agent(AGENT_OPTIONS),
  };
  return (target, init) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(target);
      const refused = refusal(url, policy);
      if (refused) {
        // Image lookups' refusals are counted; the credentials' are their refresh failures.
        if (!policy.onlyListed) imageEgressRefused.inc();
        return reject(new EgressRefused(refused));
      }
      const listed = policy.listed.has(url.host.toLowerCase());
      const request = (url.protocol === "https:" ? https : http).request(
        url,
        {
          method: init.method ?? "GET",
          // A body's length, so that no endpoint has to take it chunked.
          headers:
            init.body === undefined
              ? init.headers
              : { "Content-Length": String(Buffer.byteLength(init.body)), ...init.headers },
          signal: init.signal,
          agent: agents[url.protocol as "http:" | "https:"],
          lookup: listed ? undefined : guardedLookup(url.host, policy),
        },
        res => {
          const status = res.statusCode ?? 0;
          try {
            if (status < 200 || status > 599) throw new Error(`HTTP status ${status}`);
            const headers = new Headers();
            for (const [name, value] of Object.entries(res.headers))
              for (const one of [value ?? []].flat()) headers.append(name, one);
            const empty = [204, 205, 304].includes(status) || init.method === "HEAD";
            if (empty) res.resume();
            resolve(
              new Response(
                empty ? null : (Readable.toWeb(res) as WebReadableStream as ReadableStream),
                { status, headers },
              ),
            );
          } catch (e) {
            res.destroy();
            reject(e);
          }
        },
      );
      request.on("error", reject);
      request.end(init.body);
    });
}
