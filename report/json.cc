#include "report/json.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>

namespace tandem {

Json JsonNumber(double value) {
  if (!std::isfinite(value)) return nullptr;
  // Doubles hold every integer below 2^53 exactly; nlohmann writes a double
  // that is an integer as "100.0", an integer as "100". -0 becomes 0: valid
  // JSON, but "-0" reads as a bug in a log.
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  if (std::fabs(value) < kExactIntegers && value == std::trunc(value)) {
    return static_cast<int64_t>(value);
  }
  return value;
}

Json JsonObject(const NumberFields& numbers, const StringFields& strings) {
  Json object = Json::object();
  for (const auto& [key, value] : numbers) object[key] = JsonNumber(value);
  for (const auto& [key, value] : strings) object[key] = value;
  return object;
}

std::string JsonText(const Json& value) {
  return value.dump(/*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
                    Json::error_handler_t::replace);
}

bool ParseJsonObject(std::string_view text, NumberFields* numbers, StringFields* strings) {
  numbers->clear();
  strings->clear();
  const Json object = Json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return false;  // a parse error reads as discarded
  for (const auto& [key, value] : object.items()) {
    if (value.is_number()) {
      numbers->emplace_back(key, value.get<double>());
    } else if (value.is_null()) {
      numbers->emplace_back(key, std::nan(""));
    } else if (value.is_string()) {
      strings->emplace_back(key, value.get<std::string>());
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace tandem
