// Forged manifests for the load checks: a real manifest copied record by record through the
// container, each record open to change, so the copy's checksums are valid and only the
// loader's own checks stand between it and a plan.
#ifndef AL_TESTS_MANIFEST_MANIFEST_FORGE_H
#define AL_TESTS_MANIFEST_MANIFEST_FORGE_H

#include <cstdint>
#include <functional>
#include <string>

extern "C" {
#include "common/al_status.h"
#include "proto/adaptiveload.pb-c.h"
#include "proto/pbio_internal.h"
}

namespace altest {

// Changes one decoded record in place (owned by the reader: change it, never free it).
using Mutate = std::function<void(uint32_t tag, ProtobufCMessage *msg)>;

// Copies manifest `src` to `dst`, letting `mutate` change each record. Returns AL_OK or the
// container's error (al_last_error() says which file and record).
inline int Forge(const std::string &src, const std::string &dst, const Mutate &mutate) {
  pbio_reader *r = nullptr;
  pbio_writer *w = nullptr;
  int rc = pbio_reader_open(&r, src.c_str(), AL_KIND_MANIFEST);
  if (!rc) rc = pbio_writer_open(&w, dst.c_str(), AL_KIND_MANIFEST);
  while (!rc) {
    uint32_t tag;
    ProtobufCMessage *msg = nullptr;
    rc = pbio_read_any(r, &tag, &msg);
    if (rc == AL_EOF) {
      rc = AL_OK;
      break;
    }
    if (rc) break;
    mutate(tag, msg);
    rc = pbio_write_msg(w, tag, msg);
  }
  pbio_reader_close(r);
  return w ? pbio_writer_finish(w, rc) : rc;
}

} // namespace altest

#endif // AL_TESTS_MANIFEST_MANIFEST_FORGE_H
