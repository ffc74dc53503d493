// The part of node-forge the test certificates use (the package ships no types, and
// @types/node-forge is not a dependency).
declare module "node-forge" {
  export namespace pki {
    namespace rsa {
      interface PublicKey {
        n: unknown;
        e: unknown;
      }
      interface PrivateKey {
        n: unknown;
        e: unknown;
      }
    }
    interface CertificateField {
      name?: string;
      value?: string;
    }
    interface Certificate {
      publicKey: rsa.PublicKey;
      serialNumber: string;
      validity: { notBefore: Date; notAfter: Date };
      subject: { attributes: CertificateField[] };
      setSubject(attrs: CertificateField[]): void;
      setIssuer(attrs: CertificateField[]): void;
      setExtensions(exts: object[]): void;
      sign(key: rsa.PrivateKey, md: unknown): void;
    }
    function createCertificate(): Certificate;
    function privateKeyFromPem(pem: string): rsa.PrivateKey;
    function privateKeyToPem(key: rsa.PrivateKey): string;
    function certificateToPem(cert: Certificate): string;
    function setRsaPublicKey(n: unknown, e: unknown): rsa.PublicKey;
  }
  export namespace md {
    namespace sha256 {
      function create(): unknown;
    }
  }
  const forge: { pki: typeof pki; md: typeof md };
  export default forge;
}
