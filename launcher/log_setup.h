#pragma once
// mxrun's own log lines on stderr: "mxrun: info: ..." (coloured only on a terminal), or, with
// --log_format=json, one JSON object per line for log collectors (journald, Loki, Fluent Bit).

namespace mxrun {

void ConfigureLogging(bool json);

}  // namespace mxrun
