// What an image's config says of its ports, PATH and cache dirs (lib/images/config-shapes.ts):
// read as the runtime reads it, and bounded whatever the registry writes.
import { cacheDirOf, shapesOf, shapesSize } from "../../../lib/images/config-shapes";

describe("an image config's shapes", () => {
  test("privileged ExposedPorts, PORT-style Env, a PATH under /root, absolute entrypoint and cmd, cache dirs", () => {
    expect(
      shapesOf({
        ExposedPorts: { "443/tcp": {}, "80/tcp": {}, "8080/tcp": {}, "53/udp": {} },
        Env: [
          "PATH=/root/miniconda3/bin:/usr/local/bin:/root/.local/bin",
          "PORT=80",
          "METRICS_PORT=9090",
          "HTTP_PORT=443",
          "PORTAL=80",
          "HF_HOME=/data/hf/",
          "TORCH_HOME=relative/dir",
          "MLFLOW_TRACKING_URI=file:///mlruns",
          "XDG_CACHE_HOME=/a/../etc",
        ],
        Entrypoint: ["/root/miniconda3/bin/python", "serve.py"],
        Cmd: ["--port", "80"],
      }),
    ).toEqual({
      exposed: [53, 80, 443],
      portEnv: [
        ["PORT", 80],
        ["HTTP_PORT", 443],
      ],
      rootPath: ["/root/miniconda3/bin", "/root/.local/bin"],
      entrypoint: "/root/miniconda3/bin/python",
      cacheDirs: [
        ["HF_HOME", "/data/hf"],
        ["MLFLOW_TRACKING_URI", "/mlruns"],
      ],
    });
  });

  test("a config with none of them has no shapes; /rootfs is not /root", () => {
    expect(shapesOf({ Env: ["PATH=/usr/bin:/rootfs/bin", "PORT=8080"] })).toBeUndefined();
    expect(shapesOf({ Env: "PORT=80", ExposedPorts: ["80/tcp"] })).toBeUndefined();
  });

  test("a hostile config keeps a few short entries, whatever its size", () => {
    const shapes = shapesOf({
      ExposedPorts: Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`${i}/tcp`, {}])),
      Env: [
        ...Array.from({ length: 100 }, (_, i) => `P${i}_PORT=${i + 1}`),
        `PATH=${Array.from({ length: 1000 }, () => `/root/${"x".repeat(1000)}`).join(":")}`,
      ],
    })!;
    expect(shapes.exposed).toHaveLength(8);
    expect(shapes.portEnv).toHaveLength(8);
    expect(shapes.rootPath).toHaveLength(8);
    for (const dir of shapes.rootPath!) expect(Buffer.byteLength(dir)).toBeLessThanOrEqual(200);
    expect(shapesSize(shapes)).toBeLessThan(8 * 1024);
  });

  test("MLflow's file: URIs name a directory; other URIs do not", () => {
    expect(cacheDirOf("MLFLOW_TRACKING_URI", "file:/mlruns")).toBe("/mlruns");
    expect(cacheDirOf("MLFLOW_TRACKING_URI", "http://mlflow:5000")).toBeUndefined();
    expect(cacheDirOf("HF_HOME", "/")).toBeUndefined();
  });
});
