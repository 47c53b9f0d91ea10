#include "launcher/flags/config_file.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include <toml++/toml.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/files.h"

namespace mxrun {
namespace {

// A scalar as the text a flag would take: strings as they are, numbers in their shortest form,
// booleans as true/false. nullopt for anything else.
std::optional<std::string> ScalarText(const toml::node& node) {
  if (const auto* text = node.as_string()) return text->get();
  if (const auto* integer = node.as_integer()) return std::to_string(integer->get());
  if (const auto* number = node.as_floating_point()) {
    char buffer[64];
    const std::to_chars_result written =
        std::to_chars(buffer, buffer + sizeof buffer, number->get());
    return std::string(buffer, written.ptr);
  }
  if (const auto* flag = node.as_boolean()) return std::string(flag->get() ? "true" : "false");
  return std::nullopt;
}

// `key = "word"` for the line of `error` written `key = word`.
std::string BareAssignmentHint(const std::string& text, const toml::parse_error& error) {
  std::size_t begin = 0;
  for (auto line = error.source().begin.line; line > 1 && begin != std::string::npos; --line) {
    begin = text.find('\n', begin);
    if (begin != std::string::npos) ++begin;
  }
  if (begin == std::string::npos) return "key = \"value\"";
  const std::string line = text.substr(begin, text.find('\n', begin) - begin);
  const std::size_t equals = line.find('=');
  if (equals == std::string::npos) return "key = \"value\"";
  std::string key(absl::StripAsciiWhitespace(line.substr(0, equals)));
  std::string value(absl::StripAsciiWhitespace(line.substr(equals + 1)));
  if (const std::size_t hash = value.find('#'); hash != std::string::npos) {
    value = std::string(absl::StripAsciiWhitespace(value.substr(0, hash)));
  }
  return absl::StrCat(key, " = \"", value, "\"");
}

int LineOf(const toml::node& node) { return static_cast<int>(node.source().begin.line); }

absl::Status Error(const std::string& path, int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", what));
}

// TOML allows characters beyond ASCII only in strings and comments. Anywhere else they are an
// error, found here first: toml++ 3.3 (Debian 12's) reaches an "unreachable" point, undefined
// behaviour, when it asks whether some of them (U+00A1 to U+0499 among them) are whitespace
// (found by scripts/fuzz.sh). The line of the first one, or 0.
int FirstNonAsciiOutsideStrings(const std::string& text) {
  enum class In { kCode, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral };
  In in = In::kCode;
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool triple = i + 2 < text.size() && text[i + 1] == c && text[i + 2] == c;
    if (c == '\n') {
      ++line;
      if (in == In::kComment || in == In::kBasic || in == In::kLiteral) in = In::kCode;
      continue;
    }
    switch (in) {
      case In::kCode:
        if (static_cast<unsigned char>(c) >= 0x80) return line;
        if (c == '#') in = In::kComment;
        if (c == '"') in = triple ? In::kMultiBasic : In::kBasic;
        if (c == '\'') in = triple ? In::kMultiLiteral : In::kLiteral;
        if (triple && (c == '"' || c == '\'')) i += 2;
        break;
      case In::kComment:
        break;
      case In::kBasic:
      case In::kMultiBasic:
        if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {
          ++i;  // an escaped character, a quote among them
        } else if (c == '"' && (in == In::kBasic || triple)) {
          if (in == In::kMultiBasic) i += 2;
          in = In::kCode;
        }
        break;
      case In::kLiteral:
      case In::kMultiLiteral:
        if (c == '\'' && (in == In::kLiteral || triple)) {
          if (in == In::kMultiLiteral) i += 2;
          in = In::kCode;
        }
        break;
    }
  }
  return 0;
}

}  // namespace

absl::StatusOr<ConfigFile> ParseConfigText(const std::string& path, const std::string& text) {
  if (const int line = FirstNonAsciiOutsideStrings(text); line > 0) {
    return Error(path, line,
                 "a character beyond ASCII outside a string or comment; TOML allows "
                 "them only there (write the value in quotes: key = \"value\")");
  }
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    std::string what(error.description());
    // The usual slip: a word without quotes (nproc_per_node = gpu).
    if (what.find("could not determine value type") != std::string::npos) {
      absl::StrAppend(&what, "; text needs quotes: ", BareAssignmentHint(text, error));
    }
    return Error(path, static_cast<int>(error.source().begin.line), what);
  }
  ConfigFile file;
  file.path = path;
  for (const auto& [key, node] : root) {
    ConfigEntry entry;
    entry.key = std::string(key.str());
    entry.line = LineOf(node);
    if (const toml::array* items = node.as_array()) {
      entry.is_array = true;
      for (const toml::node& item : *items) {
        std::optional<std::string> value = ScalarText(item);
        if (!value) {
          return Error(path, LineOf(item),
                       absl::StrCat("'", entry.key,
                                    "' holds an item that is "
                                    "not a string, number or boolean"));
        }
        entry.values.push_back(std::move(*value));
      }
    } else if (const toml::table* table = node.as_table()) {
      entry.is_table = true;
      std::string joined;
      for (const auto& [name, item] : *table) {
        std::optional<std::string> value = ScalarText(item);
        if (!value) {
          return Error(path, LineOf(item),
                       absl::StrCat("'", entry.key, ".", std::string(name.str()),
                                    "' is not a string, number or boolean"));
        }
        absl::StrAppend(&joined, joined.empty() ? "" : ",", std::string(name.str()), "=", *value);
      }
      entry.values.push_back(std::move(joined));
    } else if (std::optional<std::string> value = ScalarText(node)) {
      entry.values.push_back(std::move(*value));
    } else {
      return Error(path, entry.line,
                   absl::StrCat("'", entry.key,
                                "' is a date or time; accepted: "
                                "a string, number, boolean, array or table"));
    }
    file.entries.push_back(std::move(entry));
  }
  // toml++ keeps keys sorted; the file's order reads better in messages.
  std::stable_sort(file.entries.begin(), file.entries.end(),
                   [](const ConfigEntry& a, const ConfigEntry& b) { return a.line < b.line; });
  return file;
}

absl::StatusOr<ConfigFile> ReadConfigFile(const std::string& path) {
  std::optional<std::string> text = ReadWholeFile(path);
  if (!text) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config=", path, ": cannot open the configuration file"));
  }
  return ParseConfigText(path, *text);
}

}  // namespace mxrun
