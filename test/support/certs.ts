// A throw-away certificate authority and a server certificate for 127.0.0.1/localhost, written to
// a temp dir: the controller serves its webhook with it (SSL_KEY_PATH/SSL_CERT_PATH) and the
// stand-in API serves HTTPS with it (the kubeconfig trusts the CA). Test use only.
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

// Node generates the RSA keys (native, fast); forge builds and signs the X.509 certificates.
function keyPair(): { privateKey: pki.rsa.PrivateKey; publicKey: pki.rsa.PublicKey } {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pem = privateKey.export({ type: "pkcs1", format: "pem" }).toString();
  const forgeKey = forge.pki.privateKeyFromPem(pem);
  return {
    privateKey: forgeKey,
    publicKey: forge.pki.setRsaPublicKey(forgeKey.n, forgeKey.e),
  };
}

function certificate(
  subjectCN: string,
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
  cert.setSubject([{ name: "commonName", value: subjectCN }]);
  cert.setExtensions(extensions);
  return cert;
}

/** A fresh CA and a server certificate it signed, for 127.0.0.1 and localhost. */
export function createTestCerts(): TestCerts {
  const ca = keyPair();
  const caCert = certificate("admission-guard test CA", ca.publicKey, [
    { name: "basicConstraints", cA: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true },
  ]);
  caCert.setIssuer(caCert.subject.attributes);
  caCert.sign(ca.privateKey, forge.md.sha256.create());

  const server = keyPair();
  const serverCert = certificate("127.0.0.1", server.publicKey, [
    { name: "basicConstraints", cA: false },
    { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
    { name: "extKeyUsage", serverAuth: true },
    {
      name: "subjectAltName",
      altNames: [
        { type: 7, ip: "127.0.0.1" },
        { type: 2, value: "localhost" },
      ],
    },
  ]);
  serverCert.setIssuer(caCert.subject.attributes);
  serverCert.sign(ca.privateKey, forge.md.sha256.create());

  const dir = mkdtempSync(join(tmpdir(), "admission-guard-certs-"));
  const out: TestCerts = {
    dir,
    caPem: forge.pki.certificateToPem(caCert),
    certPem: forge.pki.certificateToPem(serverCert),
    keyPem: forge.pki.privateKeyToPem(server.privateKey),
    caPath: join(dir, "ca.crt"),
    certPath: join(dir, "tls.crt"),
    keyPath: join(dir, "tls.key"),
  };
  writeFileSync(out.caPath, out.caPem);
  writeFileSync(out.certPath, out.certPem);
  writeFileSync(out.keyPath, out.keyPem, { mode: 0o600 });
  return out;
}
