// openmla::Error -> Python exceptions, keeping the C++ message (which names the argument):
//   kInvalidArgument, kWorkspaceTooSmall -> ValueError, or TypeError when what came is a dtype
//                                           ("block_table: expected dtype int32, got int64")
//   kUnsupported                         -> NotImplementedError (a RuntimeError subclass)
//   kCudaError, kInternal                -> RuntimeError
//   runtime::PoolExhausted               -> openmla.PoolExhausted (a ValueError subclass) with
//                                           pages_needed / pages_free attributes
#include "bindings.h"

#include <cstring>
#include <string>

#include "openmla/error.h"
#include "openmla/runtime/page_pool.h"
#include "openmla/tensor.h"

namespace openmla::python {
namespace {

PyObject* g_pool_exhausted = nullptr;

// check.h formats every argument error as "<name>: expected <expected>, got <got>"; a `got` that
// is a dtype name means the argument had the wrong element type.
bool is_dtype_error(const std::string& message) {
  const size_t at = message.rfind(", got ");
  if (at == std::string::npos) return false;
  const std::string got = message.substr(at + 6);
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat8E4M3, DType::kUInt8,
                  DType::kInt32, DType::kInt64, DType::kFloat64, DType::kUndefined}) {
    if (got == dtype_name(t)) return true;
  }
  return false;
}

// The C++ validators name struct members (kv.data, cache.scale); Python callers pass kv_cache,
// kv_scale. The Python name goes in front, the C++ text stays as it is.
std::string with_python_name(const std::string& message) {
  static const struct {
    const char* cpp;
    const char* py;
  } kNames[] = {
      {"kv.data:", "kv_cache"},    {"cache.data:", "kv_cache"},  {"kv.scale:", "kv_scale"},
      {"cache.scale:", "kv_scale"}, {"kv.format:", "kv_format"}, {"cache.format:", "kv_format"},
      {"cache.device_scale:", "kv_scale"}, {"e4m3_overflow:", "overflow"},
  };
  for (const auto& n : kNames) {
    if (message.compare(0, std::strlen(n.cpp), n.cpp) == 0) return std::string(n.py) + ": " + message;
  }
  return message;
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const runtime::PoolExhausted& e) {
    nb::object exc = nb::borrow<nb::object>(g_pool_exhausted)(nb::str(e.what()));
    exc.attr("pages_needed") = e.pages_needed();
    exc.attr("pages_free") = e.pages_free();
    PyErr_SetObject(g_pool_exhausted, exc.ptr());
  } catch (const Error& e) {
    const std::string message = with_python_name(e.what());
    PyObject* type = PyExc_RuntimeError;
    switch (e.status()) {
      case Status::kInvalidArgument:
      case Status::kWorkspaceTooSmall:
        type = is_dtype_error(message) ? PyExc_TypeError : PyExc_ValueError;
        break;
      case Status::kUnsupported: type = PyExc_NotImplementedError; break;
      default: type = PyExc_RuntimeError; break;
    }
    PyErr_SetString(type, message.c_str());
  }
}

}  // namespace

void register_errors(nb::module_& m) {
  g_pool_exhausted = PyErr_NewExceptionWithDoc(
      "openmla._C.PoolExhausted",
      "The page pool has fewer free pages than the operation needs; nothing was changed. "
      "Attributes: pages_needed, pages_free.",
      PyExc_ValueError, nullptr);
  m.attr("PoolExhausted") = nb::handle(g_pool_exhausted);
  nb::register_exception_translator(translate);
}

}  // namespace openmla::python
