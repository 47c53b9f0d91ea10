#pragma once
// The worker side of torchelastic's error file: what PyTorch's @record decorator writes to
// TORCHELASTIC_ERROR_FILE when a worker dies of an exception, so mxrun and torchrun both show the
// trainer's own message in their failure summary.

#include <string>

namespace mxrun::trainer {

// The JSON document: {"message": {"message": "<type>: <what>", "extraInfo": {"py_callstack":
// <context>, "timestamp": "<unix seconds>"}}}.
std::string ErrorFileJson(const std::string& type, const std::string& what,
                          const std::string& context, long long unix_seconds);

// Writes it to `path` (replacing any earlier file); false when it cannot be written.
bool WriteErrorFile(const std::string& path, const std::string& type, const std::string& what,
                    const std::string& context);

}  // namespace mxrun::trainer
