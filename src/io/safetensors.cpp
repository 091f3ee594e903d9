// safetensors writer and validating reader (https://github.com/huggingface/safetensors).
#include "cgdp/io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/io/json_message.hpp"

namespace cgdp {

// Tensor bytes and the header length are copied as they lie in memory.
static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

using nlohmann::json;

namespace {

constexpr const char* kMetadataKey = "__metadata__";

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw IoError(cat(source, ": ", what));
}

DType parse_dtype(const std::string& name, const std::string& where) {
  if (name == "F32") return DType::kF32;
  if (name == "F64") return DType::kF64;
  throw IoError(cat(where, "unsupported dtype \"", name, "\" (cgdp reads F32, F64)"));
}

std::string range_string(const TensorEntry& e) {
  return cat("[", e.begin, ", ", e.end, ")");
}

// Reads one "name": {"dtype", "shape", "data_offsets"} entry; unknown keys are ignored, as the
// reference implementation does.
TensorEntry parse_entry(const std::string& name, const json& value, const std::string& source) {
  const std::string where = cat(source, ": tensor '", name, "': ");
  if (!value.is_object()) throw IoError(cat(where, "header entry is not a JSON object"));
  const auto dtype = value.find("dtype"), shape = value.find("shape"),
             offsets = value.find("data_offsets");
  if (dtype == value.end() || !dtype->is_string())
    throw IoError(cat(where, "\"dtype\" is missing or not a string"));
  TensorEntry e{parse_dtype(dtype->get<std::string>(), where), {}, 0, 0};
  if (shape == value.end() || !shape->is_array())
    throw IoError(cat(where, "\"shape\" is missing or not an array"));
  uint64_t count = 1;
  for (const json& dim : *shape) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > INT64_MAX)
      throw IoError(cat(where, "\"shape\" ", shape->dump(), " holds a non-integer or negative"));
    e.shape.push_back(dim.get<int64_t>());
    if (__builtin_mul_overflow(count, dim.get<uint64_t>(), &count))
      throw IoError(cat(where, "shape ", shape->dump(), " has too many elements"));
  }
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    throw IoError(cat(where, "\"data_offsets\" is missing or not two non-negative integers"));
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end)
    throw IoError(cat(where, "data_offsets ", range_string(e), " end before they begin"));
  uint64_t need = 0;
  if (__builtin_mul_overflow(count, dtype_size(e.dtype), &need) || need != e.end - e.begin)
    throw IoError(cat(where, "data_offsets ", range_string(e), " hold ", e.end - e.begin,
                      " bytes but ", dtype_name(e.dtype), " of shape ", shape->dump(), " needs ",
                      count, " x ", dtype_size(e.dtype)));
  return e;
}

Metadata parse_metadata(const json& value, const std::string& source) {
  if (!value.is_object()) fail(source, "__metadata__ is not a JSON object");
  Metadata metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      fail(source, cat("__metadata__ value for \"", key, "\" is not a string"));
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// Finds a name given twice at the top level of a JSON object, which parsing into a json object
// would keep once. A SAX pass: nlohmann's callback parser rescans the whole object after each
// member it adds, quadratic in the tensor count (50,000 tensors took 50 s).
class DuplicateNameFinder final : public nlohmann::json_sax<json> {
 public:
  std::string duplicate;  // the first name given twice, or ""

  bool key(string_t& name) override {
    if (depth_ == 1 && duplicate.empty() && !names_.insert(name).second) duplicate = name;
    return true;
  }
  bool start_object(std::size_t) override { return enter(); }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override { return leave(); }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // json::parse has reported it
  }

 private:
  bool enter() {
    ++depth_;
    return true;
  }
  bool leave() {
    --depth_;
    return true;
  }

  int depth_ = 0;
  std::set<std::string> names_;
};

// The byte ranges must tile the data section exactly: no overlap, no gap, nothing after.
void check_tiling(const TensorEntries& entries, uint64_t data_size, const std::string& source) {
  std::vector<std::pair<const std::string*, const TensorEntry*>> order;
  uint64_t need = 0;
  for (const auto& [name, e] : entries) {
    order.emplace_back(&name, &e);
    need = std::max(need, e.end);
  }
  if (need > data_size)
    fail(source,
         cat("truncated: the tensors need ", need, " data bytes but the file holds ", data_size));
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::pair(a.second->begin, a.second->end) < std::pair(b.second->begin, b.second->end);
  });
  uint64_t pos = 0;
  const std::string* previous = nullptr;
  for (const auto& [name, e] : order) {
    if (e->begin < pos)
      fail(source, cat("tensor '", *name, "' data_offsets ", range_string(*e),
                       " overlap those of tensor '", *previous, "'"));
    if (e->begin > pos)
      fail(source, cat("bytes [", pos, ", ", e->begin, ") before tensor '", *name,
                       "' belong to no tensor"));
    pos = e->end;
    previous = name;
  }
  if (pos < data_size)
    fail(source, cat(data_size - pos, " bytes after the last tensor belong to no tensor"));
}

template <typename Stored, typename T>
void convert(const char* bytes, std::vector<T>& out) {
  if constexpr (std::is_same_v<Stored, T>) {
    if (!out.empty())
      std::memcpy(out.data(), bytes, out.size() * sizeof(T));  // an empty one's data() may be null
  } else {
    for (size_t i = 0; i < out.size(); ++i) {
      Stored v;
      std::memcpy(&v, bytes + i * sizeof(Stored), sizeof(Stored));
      out[i] = static_cast<T>(v);
    }
  }
}

template <typename T>
TensorRef tensor_ref(DType dtype, std::span<const T> values, Shape shape) {
  return {dtype, std::move(shape), std::as_bytes(values)};
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  return dtype == DType::kF32 ? "F32" : "F64";
}

size_t dtype_size(DType dtype) {
  return dtype == DType::kF32 ? 4 : 8;
}

TensorRef TensorRef::of(std::span<const float> values, Shape shape) {
  return tensor_ref(DType::kF32, values, std::move(shape));
}

TensorRef TensorRef::of(std::span<const double> values, Shape shape) {
  return tensor_ref(DType::kF64, values, std::move(shape));
}

TensorLayout lay_out_tensors(const TensorRefs& tensors) {
  std::vector<std::pair<const std::string*, const TensorRef*>> order;
  size_t total = 0;
  for (const auto& [name, t] : tensors) {
    const bool dims_ok =
        std::all_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d >= 0; });
    if (!dims_ok || t.bytes.size() != static_cast<size_t>(count_of(t.shape)) * dtype_size(t.dtype))
      throw Error(cat("tensor '", name, "': ", t.bytes.size(), " bytes do not fit ",
                      dtype_name(t.dtype), " of shape ", shape_string(t.shape)));
    order.emplace_back(&name, &t);
    total += t.bytes.size();
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second->dtype) > dtype_size(b.second->dtype);
  });
  TensorLayout layout;
  layout.data.reserve(total);
  for (const auto& [name, t] : order) {
    const uint64_t begin = layout.data.size();
    layout.data.append(reinterpret_cast<const char*>(t->bytes.data()), t->bytes.size());
    layout.entries.emplace(*name, TensorEntry{t->dtype, t->shape, begin, layout.data.size()});
  }
  return layout;
}

std::string encode_header(const TensorEntries& entries, const Metadata& metadata) {
  json header = json::object();
  for (const auto& [name, e] : entries) {
    if (name == kMetadataKey) throw Error(cat("a tensor may not be called ", kMetadataKey));
    header[name] = {{"dtype", dtype_name(e.dtype)},
                    {"shape", e.shape},
                    {"data_offsets", json::array({e.begin, e.end})}};
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // a name or value that is not UTF-8
    throw IoError(cat("cannot write a safetensors header: ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  const uint64_t length = text.size();
  std::string out(sizeof length, '\0');
  std::memcpy(out.data(), &length, sizeof length);
  return out + text;
}

void save_safetensors(const std::filesystem::path& path, const TensorRefs& tensors,
                      const Metadata& metadata) {
  const TensorLayout layout = lay_out_tensors(tensors);
  write_file_atomically(path, {encode_header(layout.entries, metadata), layout.data});
}

SafetensorsFile::SafetensorsFile(std::string bytes, std::string source)
    : bytes_(std::move(bytes)), source_(std::move(source)) {
  uint64_t length = 0;
  if (bytes_.size() < sizeof length)
    fail(source_,
         cat("truncated: ", bytes_.size(), " bytes, too short for the 8-byte header length"));
  std::memcpy(&length, bytes_.data(), sizeof length);
  if (length > bytes_.size() - sizeof length)
    fail(source_, cat("truncated or bad header length: header length ", length, " exceeds the ",
                      bytes_.size() - sizeof length, " bytes that follow it"));
  data_begin_ = sizeof length + length;
  parse_header(std::string_view(bytes_).substr(sizeof length, length));
  check_tiling(entries_, bytes_.size() - data_begin_, source_);
}

void SafetensorsFile::parse_header(std::string_view header) {
  if (header.empty() || header.front() != '{')
    fail(source_, "bad JSON header: it does not start with '{' (bad header length?)");
  json parsed;
  try {
    parsed = json::parse(header.begin(), header.end());
  } catch (const json::exception& e) {
    fail(source_, cat("bad JSON header: ", json_message(e)));
  }
  if (!parsed.is_object()) fail(source_, "bad JSON header: not a JSON object");
  DuplicateNameFinder names;
  json::sax_parse(header.begin(), header.end(), &names);
  if (!names.duplicate.empty()) fail(source_, cat("header names \"", names.duplicate, "\" twice"));
  for (const auto& [name, value] : parsed.items()) {
    if (name == kMetadataKey)
      metadata_ = parse_metadata(value, source_);
    else
      entries_.emplace(name, parse_entry(name, value, source_));
  }
}

std::string_view SafetensorsFile::header_section() const {
  return std::string_view(bytes_).substr(0, data_begin_);
}

std::string_view SafetensorsFile::data_section() const {
  return std::string_view(bytes_).substr(data_begin_);
}

const TensorEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) fail(source_, cat("no tensor named '", name, "'"));
  return it->second;
}

template <typename T>
std::vector<T> SafetensorsFile::values(const std::string& name) const {
  const TensorEntry& e = entry(name);
  std::vector<T> out((e.end - e.begin) / dtype_size(e.dtype));
  const char* bytes = bytes_.data() + data_begin_ + e.begin;
  if (e.dtype == DType::kF32)
    convert<float>(bytes, out);
  else
    convert<double>(bytes, out);
  return out;
}

template std::vector<float> SafetensorsFile::values<float>(const std::string&) const;
template std::vector<double> SafetensorsFile::values<double>(const std::string&) const;

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
  return SafetensorsFile(read_file(path), path.string());
}

}  // namespace cgdp
