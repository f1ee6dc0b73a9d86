#include "bootstrap/pmix.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/log.h"

#if defined(WEFT_HAVE_PMIX)
#include <dlfcn.h>
#include <pmix.h>
#endif

extern char** environ;

namespace weft::pmix {

#if defined(WEFT_HAVE_PMIX)

namespace {

// The calls this file makes, resolved from libpmix.so.2 once.
struct Api {
  decltype(&PMIx_Init) init = nullptr;
  decltype(&PMIx_Finalize) finalize = nullptr;
  decltype(&PMIx_Put) put = nullptr;
  decltype(&PMIx_Commit) commit = nullptr;
  decltype(&PMIx_Fence) fence = nullptr;
  decltype(&PMIx_Get) get = nullptr;
  decltype(&PMIx_Value_destruct) valueDestruct = nullptr;
  decltype(&PMIx_Error_string) errorString = nullptr;
  std::string loadError;
};

template <typename F>
bool resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

const Api& api() {
  static const Api loaded = [] {
    Api a;
    void* lib = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      a.loadError = why != nullptr ? why : "dlopen failed";
      return a;
    }
    // Never closed: Open MPI may use the same library in this process.
    if (!resolve(lib, "PMIx_Init", &a.init) || !resolve(lib, "PMIx_Finalize", &a.finalize) ||
        !resolve(lib, "PMIx_Put", &a.put) || !resolve(lib, "PMIx_Commit", &a.commit) ||
        !resolve(lib, "PMIx_Fence", &a.fence) || !resolve(lib, "PMIx_Get", &a.get) ||
        !resolve(lib, "PMIx_Value_destruct", &a.valueDestruct) ||
        !resolve(lib, "PMIx_Error_string", &a.errorString)) {
      a.init = nullptr;
      a.loadError = "libpmix.so.2 lacks a PMIx v4 call";
    }
    return a;
  }();
  return loaded;
}

Status pmixError(const Api& a, const char* call, pmix_status_t rc) {
  return makeError(weftSystemError,
                   "%s failed: %s. The launcher's PMIx server did not answer as expected; set "
                   "WEFT_ADDR=host:port of rank 0 (or MASTER_ADDR and MASTER_PORT) to rendezvous "
                   "without it",
                   call, a.errorString(rc));
}

// One PMIx session per process, opened at the first rendezvous and closed
// at exit: a process that initialized PMIx and exits without finalizing
// makes mpirun abort the job, and PMIx_Init again after PMIx_Finalize left
// a later fence waiting for good (one rank of 4 across two namespaces, in 2
// of 17 runs of the ASan build). atexit handlers run before libpmix's own
// destructors (it is never closed), so the finalize finds it whole.
Status openSession(const Api& a, pmix_proc_t* me) {
  static pmix_proc_t proc;
  static pmix_status_t rc = PMIX_SUCCESS;
  static std::once_flag once;
  std::call_once(once, [&a] {
    std::memset(&proc, 0, sizeof proc);
    rc = a.init(&proc, nullptr, 0);
    if (rc == PMIX_SUCCESS) std::atexit([] { (void)api().finalize(nullptr, 0); });
  });
  if (rc != PMIX_SUCCESS) return pmixError(a, "PMIx_Init", rc);
  *me = proc;
  return Status::ok();
}

}  // namespace

bool launchedUnderPmix() {
  if (std::getenv("PMIX_NAMESPACE") == nullptr) return false;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "PMIX_SERVER_URI", 15) == 0) return true;
  return false;
}

Status shareFromRankZero(const std::function<Status(std::string*)>& make, int64_t timeoutMs,
                         std::string* value) {
  const Api& a = api();
  if (a.init == nullptr)
    return makeError(weftSystemError,
                     "cannot load libpmix.so.2 (%s) to rendezvous through the launcher; install "
                     "libpmix2 or set WEFT_ADDR=host:port of rank 0",
                     a.loadError.c_str());
  // The k-th call of every process fences with the k-th of the others and
  // reads the k-th key: communicators built from the environment pair up in
  // the order each process creates them.
  static std::mutex mu;
  static unsigned calls = 0;
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = "weft.rendezvous." + std::to_string(calls++);

  pmix_proc_t me;
  WEFT_RETURN_IF_ERROR(openSession(a, &me));

  if (me.rank == 0) {
    WEFT_RETURN_IF_ERROR(make(value));
    pmix_value_t v;
    std::memset(&v, 0, sizeof v);
    v.type = PMIX_STRING;
    v.data.string = value->data();
    pmix_status_t rc = a.put(PMIX_GLOBAL, key.c_str(), &v);
    if (rc != PMIX_SUCCESS) return pmixError(a, "PMIx_Put", rc);
    rc = a.commit();
    if (rc != PMIX_SUCCESS) return pmixError(a, "PMIx_Commit", rc);
  }

  pmix_proc_t everyone;
  std::memset(&everyone, 0, sizeof everyone);
  std::memcpy(everyone.nspace, me.nspace, sizeof everyone.nspace);
  everyone.rank = PMIX_RANK_WILDCARD;
  pmix_info_t info[2];
  std::memset(info, 0, sizeof info);
  std::strncpy(info[0].key, PMIX_COLLECT_DATA, PMIX_MAX_KEYLEN);
  info[0].value.type = PMIX_BOOL;
  info[0].value.data.flag = true;
  std::strncpy(info[1].key, PMIX_TIMEOUT, PMIX_MAX_KEYLEN);
  info[1].value.type = PMIX_INT;
  info[1].value.data.integer = static_cast<int>(std::max<int64_t>(1, (timeoutMs + 999) / 1000));
  pmix_status_t rc = a.fence(&everyone, 1, info, 2);
  if (rc != PMIX_SUCCESS) return pmixError(a, "PMIx_Fence over the launcher's job", rc);

  if (me.rank != 0) {
    pmix_proc_t zero = everyone;
    zero.rank = 0;
    pmix_value_t* got = nullptr;
    rc = a.get(&zero, key.c_str(), nullptr, 0, &got);
    if (rc != PMIX_SUCCESS) return pmixError(a, "PMIx_Get of rank 0's rendezvous", rc);
    const bool isString = got->type == PMIX_STRING && got->data.string != nullptr;
    if (isString) *value = got->data.string;
    a.valueDestruct(got);
    std::free(got);
    if (!isString)
      return Status(weftSystemError, "PMIx_Get returned rank 0's rendezvous as a non-string");
  }
  WEFT_INFO(kLogBootstrap, "rendezvous through the launcher's PMIx server (namespace %s, rank %u)",
            me.nspace, me.rank);
  return Status::ok();
}

#else  // !WEFT_HAVE_PMIX

bool launchedUnderPmix() {
  return false;
}

Status shareFromRankZero(const std::function<Status(std::string*)>&, int64_t, std::string*) {
  return Status(weftSystemError,
                "weft was built without PMIx (libpmix-dev): set WEFT_ADDR=host:port of rank 0");
}

#endif

}  // namespace weft::pmix
