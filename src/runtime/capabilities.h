#pragma once
// Which setting of which feature runs on which device, as data (DESIGN.md §1.4). Startup
// validation reads this table instead of listing devices in assertions, so that enabling a
// feature on a device is one row, and the message for a refused combination names the device,
// the setting and what to use instead.
#include <optional>
#include <string>
#include <vector>

namespace strata {

struct CapabilityRow {
  std::string feature;               // e.g. "mamba_radix_cache_strategy"
  std::string flag;                  // the command-line flag that selects it
  std::string value;                 // one setting of the feature
  std::vector<std::string> devices;  // devices that support the setting
  std::string why;                   // what the setting needs (said when a device lacks it)
};

// Every row, in order of preference: `auto` picks the first supported row of a feature.
const std::vector<CapabilityRow>& capability_table();

// The settings a feature knows, in table order.
std::vector<std::string> capability_values(const std::string& feature);

// Resolves "auto" to the preferred setting supported on `device` (other values pass through).
std::string resolve_capability(const std::string& feature, const std::string& value,
                               const std::string& device);

// One plain-words problem when `value` is not a setting of `feature` at all (a typo), whatever
// the device; nullopt for auto and every known setting.
std::optional<std::string> check_capability_value(const std::string& feature,
                                                  const std::string& value);

// One plain-words problem when `value` of `feature` cannot run on `device`; nullopt when it can.
std::optional<std::string> check_capability(const std::string& feature, const std::string& value,
                                            const std::string& device);

}  // namespace strata
