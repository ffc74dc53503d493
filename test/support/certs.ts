// Throw-away certificates for tests, written to a temp dir. createTestCerts(): a CA and a server
// certificate for 127.0.0.1/localhost — the controller serves its webhook with it
// (SSL_KEY_PATH/SSL_CERT_PATH) and the stand-in API serves HTTPS with it (the kubeconfig trusts the
// CA). The real control plane (test/cluster) also issues client certificates (a user name and its
// groups, as the API server reads them from CN and O) from a CA of its own. Test use only.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import forge, { type pki } from "node-forge";

export interface TestCerts {
  dir: string;
  caPem: string;
  certPem: string;
  keyPem: string;
  caPath: string;
  certPath: string;
  keyPath: string;
}

interface KeyPair {
  privateKey: pki.rsa.PrivateKey;
  publicKey: pki.rsa.PublicKey;
}

/** A CA that can sign more certificates (see issueCertificate). */
export interface CertificateAuthority {
  cert: pki.Certificate;
  key: pki.rsa.PrivateKey;
  pem: string;
}

/** A certificate and its key, PEM. */
export interface IssuedCertificate {
  certPem: string;
  keyPem: string;
}

export interface CertificateRequest {
  commonName: string;
  /** Subject O values: the groups of a client certificate. */
  organizations?: string[];
  /** Server certificate: the IP addresses and DNS names it is valid for. */
  ips?: string[];
  dnsNames?: string[];
  usage: "server" | "client";
}

// Node generates the RSA keys (native, fast); forge builds and signs the X.509 certificates.
function keyPair(): KeyPair {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pem = privateKey.export({ type: "pkcs1", format: "pem" }).toString();
  const forgeKey = forge.pki.privateKeyFromPem(pem);
  return {
    privateKey: forgeKey,
    publicKey: forge.pki.setRsaPublicKey(forgeKey.n, forgeKey.e),
  };
}

function certificate(
  subject: pki.CertificateField[],
  publicKey: pki.rsa.PublicKey,
  extensions: object[],
): pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  // A positive serial in minimal DER: first byte 0x01–0x7f. (It used to be "00" + random bytes;
  // forge drops one leading zero, so a random first byte of 0x00 — 1 cert in 256 — left a
  // redundant one, which OpenSSL rejects with "illegal padding": a rare e2e start-up failure.)
  const serial = randomBytes(8);
  serial[0] = (serial[0] & 0x7f) | 0x01;
  cert.serialNumber = serial.toString("hex");
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + 7 * 24 * 3600_000);
  cert.setSubject(subject);
  cert.setExtensions(extensions);
  return cert;
}

export function createCertificateAuthority(
  commonName = "admission-guard test CA",
): CertificateAuthority {
  const ca = keyPair();
  const cert = certificate([{ name: "commonName", value: commonName }], ca.publicKey, [
    { name: "basicConstraints", cA: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, digitalSignature: true },
  ]);
  cert.setIssuer(cert.subject.attributes);
  cert.sign(ca.privateKey, forge.md.sha256.create());
  return { cert, key: ca.privateKey, pem: forge.pki.certificateToPem(cert) };
}

/** A server or client certificate signed by the CA. */
export function issueCertificate(
  ca: CertificateAuthority,
  request: CertificateRequest,
): IssuedCertificate {
  const pair = keyPair();
  const subject: pki.CertificateField[] = [
    ...(request.organizations ?? []).map(value => ({ name: "organizationName", value })),
    { name: "commonName", value: request.commonName },
  ];
  const altNames = [
    ...(request.ips ?? []).map(ip => ({ type: 7, ip })),
    ...(request.dnsNames ?? []).map(value => ({ type: 2, value })),
  ];
  const cert = certificate(subject, pair.publicKey, [
    { name: "basicConstraints", cA: false },
    { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
    request.usage === "server"
      ? { name: "extKeyUsage", serverAuth: true }
      : { name: "extKeyUsage", clientAuth: true },
    ...(altNames.length ? [{ name: "subjectAltName", altNames }] : []),
  ]);
  cert.setIssuer(ca.cert.subject.attributes);
  cert.sign(ca.key, forge.md.sha256.create());
  return {
    certPem: forge.pki.certificateToPem(cert),
    keyPem: forge.pki.privateKeyToPem(pair.privateKey),
  };
}

/** A fresh CA and a server certificate it signed, for 127.0.0.1 and localhost. */
export function createTestCerts(): TestCerts {
  const ca = createCertificateAuthority();
  const server = issueCertificate(ca, {
    commonName: "127.0.0.1",
    ips: ["127.0.0.1"],
    dnsNames: ["localhost"],
    usage: "server",
  });
  const dir = mkdtempSync(join(tmpdir(), "admission-guard-certs-"));
  const out: TestCerts = {
    dir,
    caPem: ca.pem,
    certPem: server.certPem,
    keyPem: server.keyPem,
    caPath: join(dir, "ca.crt"),
    certPath: join(dir, "tls.crt"),
    keyPath: join(dir, "tls.key"),
  };
  writeFileSync(out.caPath, out.caPem);
  writeFileSync(out.certPath, out.certPem);
  writeFileSync(out.keyPath, out.keyPem, { mode: 0o600 });
  return out;
}
