#include "launcher/config_file.h"

#include <cctype>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace mxrun {
namespace {

class LineParser {
 public:
  LineParser(const std::string& path, int line, const std::string& text)
      : path_(path), line_(line), text_(text) {}

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ":", line_, ": ", what));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size() || text_[pos_] == '#';
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  absl::StatusOr<std::string> Key() {
    SkipSpace();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                                   text_[pos_] == '_' || text_[pos_] == '-')) {
      ++pos_;
    }
    if (pos_ == start) return Error("expected a key (letters, digits, '_' or '-')");
    std::string key = text_.substr(start, pos_ - start);
    SkipSpace();
    if (Peek() == '.') return Error(absl::StrCat("dotted key '", key, ".' is not supported"));
    if (Peek() != '=') return Error(absl::StrCat("expected '=' after '", key, "'"));
    ++pos_;
    return key;
  }

  // A scalar as text: strings unquoted, true/false as "true"/"false", numbers as written.
  absl::StatusOr<std::string> Scalar() {
    SkipSpace();
    const char c = Peek();
    if (c == '"') return BasicString();
    if (c == '\'') {
      const std::size_t end = text_.find('\'', pos_ + 1);
      if (end == std::string::npos) return Error("unterminated string (missing ')");
      std::string value = text_.substr(pos_ + 1, end - pos_ - 1);
      pos_ = end + 1;
      return value;
    }
    const std::size_t start = pos_;
    while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_])) &&
           text_[pos_] != ',' && text_[pos_] != ']' && text_[pos_] != '#') {
      ++pos_;
    }
    std::string word = text_.substr(start, pos_ - start);
    if (word.empty()) return Error("expected a value");
    if (word == "true" || word == "false") return word;
    const bool numeric =
        word.find_first_not_of("0123456789+-._eE") == std::string::npos &&
        std::isdigit(static_cast<unsigned char>(word.back()));
    if (!numeric) {
      return Error(absl::StrCat("'", word,
                                "' is not a TOML value; quote strings (\"...\"), write numbers, "
                                "true or false"));
    }
    std::string cleaned;
    for (char ch : word) {
      if (ch != '_') cleaned.push_back(ch);
    }
    return cleaned;
  }

  absl::StatusOr<std::vector<std::string>> Array() {
    ++pos_;  // '['
    std::vector<std::string> items;
    for (;;) {
      SkipSpace();
      if (Peek() == ']') {
        ++pos_;
        return items;
      }
      if (pos_ >= text_.size()) {
        return Error("unterminated array (arrays must close on the line they open)");
      }
      absl::StatusOr<std::string> item = Scalar();
      if (!item.ok()) return item.status();
      items.push_back(*item);
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
      } else if (pos_ >= text_.size() || Peek() == '#') {
        return Error("unterminated array (arrays must close on the line they open)");
      } else if (Peek() != ']') {
        return Error("expected ',' or ']' in the array");
      }
    }
  }

 private:
  absl::StatusOr<std::string> BasicString() {
    std::string value;
    for (std::size_t i = pos_ + 1; i < text_.size(); ++i) {
      const char c = text_[i];
      if (c == '"') {
        pos_ = i + 1;
        return value;
      }
      if (c != '\\') {
        value.push_back(c);
        continue;
      }
      if (++i >= text_.size()) break;
      switch (text_[i]) {
        case 'n': value.push_back('\n'); break;
        case 't': value.push_back('\t'); break;
        case '"': value.push_back('"'); break;
        case '\\': value.push_back('\\'); break;
        default:
          return Error(absl::StrCat("unsupported escape '\\", std::string(1, text_[i]), "'"));
      }
    }
    return Error("unterminated string (missing \")");
  }

  const std::string& path_;
  int line_;
  const std::string& text_;
  std::size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<ConfigFile> ParseConfigText(const std::string& path, const std::string& text) {
  ConfigFile file;
  file.path = path;
  std::set<std::string> seen;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    LineParser p(path, number, line);
    if (p.AtEnd()) continue;
    if (p.Peek() == '[') {
      return p.Error("tables ([section]) are not supported: write every key at the top level");
    }
    absl::StatusOr<std::string> key = p.Key();
    if (!key.ok()) return key.status();
    if (!seen.insert(*key).second) return p.Error(absl::StrCat("'", *key, "' is set twice"));
    ConfigEntry entry;
    entry.key = *key;
    entry.line = number;
    p.SkipSpace();
    if (p.Peek() == '[') {
      absl::StatusOr<std::vector<std::string>> items = p.Array();
      if (!items.ok()) return items.status();
      entry.values = std::move(*items);
      entry.is_array = true;
    } else {
      absl::StatusOr<std::string> value = p.Scalar();
      if (!value.ok()) return value.status();
      entry.values.push_back(std::move(*value));
    }
    if (!p.AtEnd()) return p.Error("unexpected text after the value");
    file.entries.push_back(std::move(entry));
  }
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
