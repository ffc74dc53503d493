// Which resources and DRA drivers are accelerators (GPUs): what shared-memory and accelerators both
// scope their pods by. Pure.

/** Resource names that are GPUs: `<vendor>/gpu` (nvidia.com, amd.com), NVIDIA MIG slices, Intel's. */
export function isGpuResource(name: string): boolean {
  return (
    name.endsWith("/gpu") || name.startsWith("nvidia.com/mig-") || name.startsWith("gpu.intel.com/")
  );
}

/**
 * DRA drivers that are GPUs: the vendors' drivers are named `gpu.<vendor domain>` (gpu.nvidia.com,
 * gpu.intel.com, gpu.amd.com). A DeviceClass is a GPU class when its selectors require one of them.
 */
export const isGpuDriver = (driver: string | undefined): boolean =>
  !!driver && driver.startsWith("gpu.") && driver.length > 4;
