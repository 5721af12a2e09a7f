#include "tokenizer/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"

namespace strata::tok {

using nlohmann::json;

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}", path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A special token in tokenizer_config.json: a string or an AddedToken object.
std::optional<std::string> token_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

ChatTemplate ChatTemplate::load(const std::string& dir, const std::string& chosen) {
  namespace fs = std::filesystem;
  const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  json config = json::object();
  if (fs::exists(config_path)) {
    try {
      config = json::parse(read_text(config_path));
    } catch (const json::exception& e) {
      fail("{} is not valid JSON: {}", config_path.string(), e.what());
    }
  }
  std::string source;
  const json& t = config.contains("chat_template") ? config["chat_template"] : json();
  if (!chosen.empty()) {
    if (fs::is_regular_file(chosen)) return ChatTemplate(read_text(chosen), config);
    std::string names;
    if (t.is_array())
      for (const json& named : t) {
        if (named.value("name", "") == chosen)
          return ChatTemplate(named.value("template", ""), config);
        names += (names.empty() ? "" : ", ") + named.value("name", "");
      }
    fail(
        "--chat-template '{}' is neither a file nor a template named in {} ({}); give a "
        ".jinja file or one of those names",
        chosen, config_path.string(), names.empty() ? "it names none" : "names: " + names);
  }
  if (t.is_string()) {
    source = t.get<std::string>();
  } else if (t.is_array()) {
    // Named templates: [{"name": "default", "template": "..."}, ...].
    for (const json& named : t)
      if (named.value("name", "") == "default") source = named.value("template", "");
    if (source.empty())
      fail("{}: chat_template lists named templates but none is called 'default'",
           config_path.string());
  } else if (fs::exists(fs::path(dir) / "chat_template.jinja")) {
    source = read_text(fs::path(dir) / "chat_template.jinja");
  } else {
    fail(
        "{} has no chat template (no chat_template in tokenizer_config.json, no "
        "chat_template.jinja); "
        "use a chat model or give a plain prompt",
        dir);
  }
  return ChatTemplate(source, config);
}

ChatTemplate::ChatTemplate(const std::string& source, const json& config) : template_(source) {
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                           "cls_token", "mask_token"}) {
    if (!config.contains(name)) continue;
    if (auto text = token_text(config[name])) special_tokens_.set(name, *text);
  }
  if (config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array()) {
    jinja::List list;
    for (const json& t : config["additional_special_tokens"])
      if (auto text = token_text(t)) list.emplace_back(*text);
    special_tokens_.set("additional_special_tokens", jinja::Value(std::move(list)));
  }
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
  if (!messages.is_array())
    fail("chat messages must be a JSON array of {{\"role\", \"content\"}} objects");
  jinja::Dict vars = special_tokens_;
  vars.set("messages", jinja::Value::from_json(messages));
  vars.set("add_generation_prompt", add_generation_prompt);
  vars.set("tools", jinja::Value::none());
  vars.set("documents", jinja::Value::none());
  for (auto it = extra.begin(); it != extra.end(); ++it)
    vars.set(it.key(), jinja::Value::from_json(it.value()));
  if (fixed_clock_)  // variables shadow the global of the same name
    vars.set("strftime_now", jinja::strftime_now_function([t = *fixed_clock_] { return t; }));
  return template_.render(vars);
}

}  // namespace strata::tok
