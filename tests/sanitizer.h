// Which sanitizer this test program was built with, and so, in scripts/sanitize.sh's build-asan/
// and build-tsan/, the mxrun programs it runs. Memory bounds in the tests are set for the plain
// build: under ASan every process maps shadow memory (mxrun starts at ~160 MiB resident instead of
// ~8) and each thread carries fake stacks; under TSan each thread carries its own shadow state.
#pragma once

namespace mxrun::testing {

enum class Sanitizer { kNone, kAddress, kThread };

#if defined(__SANITIZE_ADDRESS__)
inline constexpr Sanitizer kSanitizer = Sanitizer::kAddress;
#elif defined(__SANITIZE_THREAD__)
inline constexpr Sanitizer kSanitizer = Sanitizer::kThread;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr Sanitizer kSanitizer = Sanitizer::kAddress;
#elif __has_feature(thread_sanitizer)
inline constexpr Sanitizer kSanitizer = Sanitizer::kThread;
#else
inline constexpr Sanitizer kSanitizer = Sanitizer::kNone;
#endif
#else
inline constexpr Sanitizer kSanitizer = Sanitizer::kNone;
#endif

}  // namespace mxrun::testing
