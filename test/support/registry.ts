// A small OCI distribution registry for tests, on loopback, plain HTTP: enough of the API for the
// module to read image configs and for containerd to pull (GET/HEAD of manifests and blobs, with
// Docker-Content-Digest), with the behaviours a real registry shows: a Bearer-token mode (401 with
// a challenge, a token endpoint), a demand for the credentials a cloud flow ends with
// (test/support/cloud-stand-ins.ts), a delay, and per-path overrides for failures and garbage.
// Every request is recorded, so tests can count what was fetched.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { BuiltImage } from "../node/support/images";

export interface Blob {
  mediaType: string;
  body: Buffer;
}

export type Override = (req: IncomingMessage, res: ServerResponse) => boolean | void;

const digestOf = (body: Buffer) => `sha256:${createHash("sha256").update(body).digest("hex")}`;

export class TestRegistry {
  private server?: Server;
  /** repository → tag → digest */
  private readonly tags = new Map<string, Map<string, string>>();
  /** digest → content (one store for every repository) */
  private readonly blobs = new Map<string, Blob>();
  readonly requests: { method: string; path: string; authorization?: string }[] = [];
  /** Bearer mode: every /v2/ call needs `Authorization: Bearer <token>` from /token. */
  bearer?: { token: string; basic?: { username: string; password: string } };
  /**
   * Cloud mode: every /v2/ call needs an Authorization `accepts` takes (a cloud stand-in's
   * `serve(registry)` sets it: ECR's Basic, Artifact Registry's and ACR's Bearer), else a 401
   * with `challenge()`; `refused` counts those 401s.
   */
  demand?: { challenge: () => string; accepts: (authorization: string | undefined) => boolean };
  refused = 0;
  /** Each answer waits this long first (a slow registry). */
  delayMs = 0;
  /** Per-path answers that replace the registry's (a 500, garbage, a redirect loop...). */
  readonly overrides: { path: RegExp; handle: Override }[] = [];
  port = 0;

  get host(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Stores a blob (manifest, config, layer) and returns its digest. */
  putBlob(mediaType: string, body: Buffer | string): string {
    const buffer = Buffer.isBuffer(body) ? body : Buffer.from(body);
    const digest = digestOf(buffer);
    this.blobs.set(digest, { mediaType, body: buffer });
    return digest;
  }

  tag(repository: string, tag: string, digest: string): void {
    if (!this.tags.has(repository)) this.tags.set(repository, new Map());
    this.tags.get(repository)!.set(tag, digest);
  }

  /** An image with this config (User, WorkingDir, Env) and one empty layer; returns its manifest digest. */
  putImage(repository: string, tag: string, config: Record<string, unknown>): string {
    const layer = Buffer.alloc(1024); // an empty tar: two zero blocks
    const mediaType = "application/vnd.oci.image.layer.v1.tar";
    const digest = this.putBlob(mediaType, layer);
    return this.putManifest(repository, tag, config, [{ mediaType, digest, size: 1024 }]);
  }

  /** An image of this config and these layers (bottom first, stored or not); its manifest digest. */
  putManifest(
    repository: string,
    tag: string,
    config: Record<string, unknown>,
    layers: { mediaType: string; digest: string; size?: number }[],
  ): string {
    const configBody = JSON.stringify({
      architecture: "amd64",
      os: "linux",
      config,
      rootfs: { type: "layers", diff_ids: layers.map(l => l.digest) },
    });
    const configDigest = this.putBlob("application/vnd.oci.image.config.v1+json", configBody);
    const manifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {
        mediaType: "application/vnd.oci.image.config.v1+json",
        digest: configDigest,
        size: Buffer.byteLength(configBody),
      },
      layers,
    });
    const digest = this.putBlob("application/vnd.oci.image.manifest.v1+json", manifest);
    this.tag(repository, tag, digest);
    return digest;
  }

  /** An image index over manifests already stored, with their platforms. */
  putIndex(
    repository: string,
    tag: string,
    entries: { digest: string; os: string; architecture: string }[],
  ): string {
    const index = JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: entries.map(e => ({
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        digest: e.digest,
        size: this.blobs.get(e.digest)?.body.length ?? 0,
        platform: { os: e.os, architecture: e.architecture },
      })),
    });
    const digest = this.putBlob("application/vnd.oci.image.index.v1+json", index);
    this.tag(repository, tag, digest);
    return digest;
  }

  /** An image built by test/node/support/images.ts, served under `repository:tag`. */
  putBuilt(repository: string, tag: string, image: BuiltImage): void {
    for (const [, blob] of image.blobs) this.putBlob(blob.mediaType, readFileSync(blob.path));
    this.tag(repository, tag, image.manifestDigest);
  }

  async start(): Promise<number> {
    this.server = createServer((req, res) => {
      setTimeout(() => this.handle(req, res), this.delayMs);
    });
    await new Promise<void>(ok => this.server!.listen(0, "127.0.0.1", ok));
    this.port = (this.server.address() as AddressInfo).port;
    return this.port;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>(ok => (this.server ? this.server.close(() => ok()) : ok()));
  }

  countOf(path: RegExp): number {
    return this.requests.filter(r => path.test(r.path)).length;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? "/").split("?")[0];
    this.requests.push({
      method: req.method ?? "GET",
      path,
      authorization: req.headers.authorization,
    });
    for (const o of this.overrides) if (o.path.test(path) && o.handle(req, res) !== false) return;
    if (path === "/token") return this.token(req, res);
    const unauthorized = (challenge: string) => {
      res.writeHead(401, { "WWW-Authenticate": challenge, "Content-Type": "application/json" });
      res.end(JSON.stringify({ errors: [{ code: "UNAUTHORIZED" }] }));
    };
    if (this.bearer && req.headers.authorization !== `Bearer ${this.bearer.token}`)
      return unauthorized(`Bearer realm="http://${this.host}/token",service="test-registry"`);
    if (this.demand && !this.demand.accepts(req.headers.authorization)) {
      this.refused++;
      return unauthorized(this.demand.challenge());
    }
    if (path === "/v2/" || path === "/v2") return void res.writeHead(200).end("{}");
    const match = /^\/v2\/(.+)\/(manifests|blobs)\/([^/]+)$/.exec(path);
    if (!match) return void res.writeHead(404).end();
    const [, repository, what, reference] = match;
    const digest = reference.startsWith("sha256:")
      ? reference
      : this.tags.get(repository)?.get(reference);
    const blob = digest ? this.blobs.get(digest) : undefined;
    if (!blob || !digest) {
      res.writeHead(404, { "Content-Type": "application/json" });
      return void res.end(
        JSON.stringify({
          errors: [{ code: what === "blobs" ? "BLOB_UNKNOWN" : "MANIFEST_UNKNOWN" }],
        }),
      );
    }
    res.writeHead(200, {
      "Content-Type": what === "manifests" ? blob.mediaType : "application/octet-stream",
      "Content-Length": blob.body.length,
      "Docker-Content-Digest": digest,
    });
    res.end(req.method === "HEAD" ? undefined : blob.body);
  }

  private token(req: IncomingMessage, res: ServerResponse): void {
    const basic = this.bearer?.basic;
    if (
      !this.bearer ||
      (basic &&
        req.headers.authorization !==
          `Basic ${Buffer.from(`${basic.username}:${basic.password}`).toString("base64")}`)
    )
      return void res.writeHead(401).end();
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ token: this.bearer.token, expires_in: 300 }));
  }
}
