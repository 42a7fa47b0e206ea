/* The software NeuronCore's private declarations: the host HAL
 * (hal_host.c) over the device model (host_model.c). Everything it needs of
 * the runtime comes through the support table (runtime/hal_support.h), so
 * the same sources build into the runtime or into a HAL library of their
 * own (the test HAL, csrc/tests/hal_wrapped.c). Prefix: tnc_. */
#ifndef TNC_NEURONCORE_H
#define TNC_NEURONCORE_H

#include "hal.h"
#include "hal_support.h"

/* the runtime's support, set by tnrt_hal_host_support before any HAL call */
extern const tnrt_hal_support_t *tnc_rt;

/* The devices modelled from the environment (host_model.c). */
typedef struct tnc_host_model {
  int count;
  tnrt_device_props_t props[TNRT_MAX_DEVICES];
  uint64_t budget; /* what the host's RAM can back, all devices together */
} tnc_host_model_t;
/* TNRT_OK, or TNRT_ERR_CONFIG with the reason in tnc_host_model_error(). */
tnrt_status_t tnc_host_model(tnc_host_model_t *out);
const char *tnc_host_model_error(void);

#endif
