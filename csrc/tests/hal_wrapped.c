/* A HAL library for the tests (make: $(BUILD)/libtnrt_hal_wrapped.so): the
 * software NeuronCore's sources built into a shared object of their own,
 * loaded through TORCH_NEURONX_HAL as a driver's would be, and reporting its
 * device memory as not host addressable. It reaches the runtime only
 * through the support table it is handed (hal_support.h), which is what
 * lets it link with -z defs. Run with TORCH_NEURONX_PROTECT_DEVICE_MEMORY=1
 * as well, its memory is closed to the host outside its tasks and
 * transfers, so a host access that bypasses it faults. */
#include "hal.h"
#include "hal_support.h"

#define EXPORT __attribute__((visibility("default")))

static tnrt_hal_t g_table;

static int not_host_addressable(void *ctx) {
  (void)ctx;
  return 0;
}

EXPORT void tnrt_hal_support(const tnrt_hal_support_t *support) { tnrt_hal_host_support(support); }

EXPORT const tnrt_hal_t *tnrt_hal_entry(void) {
  g_table = *tnrt_hal_host();
  g_table.name = "wrapped-host";
  g_table.host_addressable = not_host_addressable;
  return &g_table;
}
