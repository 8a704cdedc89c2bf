#include "msg/base/malloc_policy.h"

#include <malloc.h>

namespace msgr {

void KeepFreedMemoryForReuse() {
  // Setting either turns off glibc's dynamic adjustment of both, which is what we want:
  // the adjustment follows the sizes freed, not how soon they are needed again.
  (void)mallopt(M_MMAP_THRESHOLD, 32 << 20);
  (void)mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace msgr
