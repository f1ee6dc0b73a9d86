#include "compress_check.h"

#include <memory>

#include "base/dtype.h"
#include "compression/compressor.h"
#include "compression/local_group.h"
#include "compression/params.h"

namespace weftperf {

bool compressExact(const std::string& spec) {
  weftCompressKind_t kind;
  weftCompressorParams_t p;
  if (!weft::compression::parseSpec(spec, &kind, &p).isOk()) return false;
  return kind != weftCompressPowerSGD && !(kind == weftCompressTopK && p.randomK);
}

bool compressModel(const std::string& spec, int nranks, weftDataType_t type, bool average,
                   size_t count, const std::function<void(int, void*)>& fill,
                   std::vector<char>* out, std::string* error) {
  using namespace weft::compression;
  const size_t bytes = count * weft::dtypeSize(type);
  out->assign(bytes, 0);
  weft::Status st = runLocalGroup(nranks, [&](CollRunner& runner) -> weft::Status {
    weftCompressKind_t kind;
    weftCompressorParams_t p;
    WEFT_RETURN_IF_ERROR(parseSpec(spec, &kind, &p));
    std::unique_ptr<Compressor> c;
    WEFT_RETURN_IF_ERROR(Compressor::create(kind, p, &c));
    std::vector<char> in(bytes), res(bytes);
    fill(runner.rank(), in.data());
    WEFT_RETURN_IF_ERROR(c->allReduce(runner, in.data(), res.data(), count, type, average));
    if (runner.rank() == 0) *out = std::move(res);
    return weft::Status::ok();
  });
  if (!st.isOk()) *error = st.message();
  return st.isOk();
}

}  // namespace weftperf
