// Which registries a cloud-credentials entry serves (lib/images/cloud/registry-pattern.ts): host
// patterns as the kubelet's CredentialProviderConfig matchImages writes them, `*` within one label.
import {
  hasWildcard,
  registryMatches,
  registryPatternProblem,
} from "../../../../lib/images/cloud/registry-pattern";
import { parseSettings } from "../../../../lib/settings";

describe("registryMatches", () => {
  it.each([
    ["*.dkr.ecr.us-east-1.amazonaws.com", "123456789012.dkr.ecr.us-east-1.amazonaws.com"],
    ["*-docker.pkg.dev", "europe-west4-docker.pkg.dev"],
    ["gcr.io", "gcr.io"],
    ["*.gcr.io", "eu.gcr.io"],
    ["myreg.azurecr.io", "MyReg.AzureCR.io"],
    ["127.0.0.1:5000", "127.0.0.1:5000"],
    ["a*b*c.example", "abc.example"],
    ["a*b*c.example", "axxbyyc.example"],
  ])("%s matches %s", (pattern, registry) => expect(registryMatches(pattern, registry)).toBe(true));

  it.each([
    // `*` is part of one label, never several: another host's name cannot end in the pattern.
    ["*.dkr.ecr.us-east-1.amazonaws.com", "evil.example.dkr.ecr.us-east-1.amazonaws.com"],
    ["*.dkr.ecr.us-east-1.amazonaws.com", "dkr.ecr.us-east-1.amazonaws.com"],
    ["*-docker.pkg.dev", "europe-docker.pkg.dev.evil.example"],
    ["*-docker.pkg.dev", "-docker.pkg.dev.x"],
    ["gcr.io", "eu.gcr.io"],
    ["myreg.azurecr.io", "myreg.azurecr.io.evil.example"],
    // The port must be the same: none written matches none.
    ["127.0.0.1:5000", "127.0.0.1:5001"],
    ["127.0.0.1", "127.0.0.1:5000"],
    ["127.0.0.1:5000", "127.0.0.1"],
    // The parts of a glob keep their order and do not overlap.
    ["a*b*c.example", "acb.example"],
    ["ab*ba.example", "aba.example"],
  ])("%s does not match %s", (pattern, registry) =>
    expect(registryMatches(pattern, registry)).toBe(false),
  );
});

describe("registryPatternProblem", () => {
  it("takes hosts, label globs and ports", () => {
    for (const ok of ["gcr.io", "*.gcr.io", "*-docker.pkg.dev", "127.0.0.1:5000", "a*b.io"])
      expect(registryPatternProblem(ok)).toBeUndefined();
  });

  it.each([
    ["*", "matches every registry"],
    ["*.*", "matches every registry"],
    ["*:443", "matches every registry"],
    ["https://gcr.io", "is not a registry host pattern"],
    ["gcr.io/project", "is not a registry host pattern"],
    ["GCR.io", "is not a registry host pattern"],
    ["", "is not a registry host pattern"],
    [`${"a".repeat(251)}.io`, "is longer than a host name"],
  ])("refuses %j: %s", (pattern, problem) =>
    expect(registryPatternProblem(pattern)).toContain(problem),
  );

  it("answers a pattern of many globs against a label one short of it", () => {
    expect(registryMatches(`${"*a".repeat(60)}.io`, `${"a".repeat(59)}.io`)).toBe(false);
  });
});

describe("hasWildcard", () => {
  it("says whether a pattern has a *", () => {
    expect(hasWildcard("*.azurecr.io")).toBe(true);
    expect(hasWildcard("myreg.azurecr.io")).toBe(false);
  });
});

describe("the entries' registries (settings)", () => {
  it("ACR names each registry exactly: anyone can create a registry under azurecr.io", () => {
    expect(() =>
      parseSettings({
        images: { cloudCredentials: [{ provider: "acr", registries: ["*.azurecr.io"] }] },
      }),
    ).toThrow("must name each registry exactly (no *)");
    expect(() =>
      parseSettings({
        images: { cloudCredentials: [{ provider: "gcp", registries: ["*"] }] },
      }),
    ).toThrow("matches every registry");
  });
});
