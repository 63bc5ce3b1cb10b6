// Fuzz target for io/safetensors.h's reader and its JSON header parser.
//
// Each input goes through the decoder twice:
//   1. internal::DecodeSafetensors on the input as a whole file (length,
//      header, data): the path ReadSafetensors takes after reading;
//   2. the input as the header alone, behind a length that fits it, so that
//      every mutation reaches the JSON parser (a fuzzer rarely keeps the
//      length field in step with the header it mutates).
// Whatever decodes must re-encode, and decode again to the same file.
// Anything but a clean return or tandem::Error is a bug: another exception
// type (one of nlohmann-json's escaping the parser, say), a crash, a
// sanitizer report, an allocation beyond the input's size (libFuzzer's
// -malloc_limit_mb catches those).
//
// Built as a libFuzzer binary by tools/fuzz.sh and as a CI test with
// fuzz_main.cc (tests/fuzz/BUILD).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/check.h"
#include "io/safetensors.h"

namespace {

using tandem::SafetensorsFile;
using tandem::SafetensorsTensor;

SafetensorsFile Decode(const std::string& bytes, const char* name) {
  return tandem::internal::DecodeSafetensors(reinterpret_cast<const uint8_t*>(bytes.data()),
                                             bytes.size(), name);
}

// Re-encoding what was decoded must work and give back the same file.
// Called outside any try block: an exception here is a finding.
void CheckReencodes(const SafetensorsFile& file) {
  const SafetensorsFile again =
      Decode(tandem::internal::EncodeSafetensors(file.tensors, file.metadata), "<re-encoded>");
  if (again.tensors != file.tensors || again.metadata != file.metadata) {
    std::fprintf(stderr, "a decoded safetensors file did not survive re-encoding\n");
    std::abort();
  }
}

void DecodeAndCheck(const std::string& bytes) {
  SafetensorsFile file;
  try {
    file = Decode(bytes, "<fuzz input>");
  } catch (const tandem::Error&) {
    return;
  }
  CheckReencodes(file);
}

// `json` behind its 8-byte little-endian length, with no data.
std::string HeaderOnly(const std::string& json) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  return out + json;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  DecodeAndCheck(input);
  DecodeAndCheck(HeaderOnly(input));
  return 0;
}

// The seed corpus: files the current writer produces, and headers (for the
// second pass) as other writers lay them out.
std::vector<std::string> TandemFuzzSeeds() {
  using tandem::DType;
  using tandem::SafetensorsFromFloats;
  std::vector<std::string> seeds;
  std::map<std::string, SafetensorsTensor> tensors;
  seeds.push_back(tandem::internal::EncodeSafetensors(tensors, {}));
  tensors["fc1.weight"] = SafetensorsFromFloats({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kFloat32);
  tensors["fc1.bias"] = SafetensorsFromFloats({0.5f, -0.5f}, {2}, DType::kBFloat16);
  tensors["scalar"] = SafetensorsFromFloats({1}, {}, DType::kFloat32);
  tensors["empty"] = SafetensorsTensor{"I64", {0, 3}, {}};
  tensors["caf\xc3\xa9"] = SafetensorsTensor{"U8", {3}, {1, 2, 3}};
  seeds.push_back(tandem::internal::EncodeSafetensors(tensors, {{"format", "pt"}}));
  seeds.push_back(tandem::internal::EncodeSafetensors(tensors, {}));
  seeds.push_back(
      "{\"__metadata__\": {\"format\": \"pt\",\n"
      "                  \"note\": \"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\"},\n"
      " \"w\": {\"shape\": [2, 2], \"data_offsets\": [0, 16], \"dtype\": \"F32\"},\n"
      " \"b\": {\"dtype\": \"BF16\", \"shape\": [], \"data_offsets\": [16, 18]}}    ");
  seeds.push_back("{\"w\":{\"dtype\":\"F64\",\"shape\":[9223372036854775807,0],"
                  "\"data_offsets\":[0,0]}}");
  return seeds;
}
