// A kubeconfig for one user of one API server, as kubectl, Pepr and kubernetes-fluent-client read
// it: the stand-in API (token), the real control plane (client certificates, or a ServiceAccount's
// token). Test use only.
import { stringify } from "yaml";

export type Credentials = { certPem: string; keyPem: string } | { token: string };

/** `caPem` undefined: the server is not verified (the stand-in API over plain HTTP). */
export function kubeconfigYaml(
  server: string,
  caPem: string | undefined,
  credentials: Credentials,
): string {
  const base64 = (pem: string) => Buffer.from(pem).toString("base64");
  const user =
    "token" in credentials
      ? { token: credentials.token }
      : {
          "client-certificate-data": base64(credentials.certPem),
          "client-key-data": base64(credentials.keyPem),
        };
  const trust =
    caPem === undefined
      ? { "insecure-skip-tls-verify": true }
      : { "certificate-authority-data": base64(caPem) };
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "test", cluster: { server, ...trust } }],
    users: [{ name: "user", user }],
    contexts: [{ name: "test", context: { cluster: "test", user: "user" } }],
    "current-context": "test",
  });
}
