// Whether this test binary (and so, in scripts/sanitize.sh's build-asan/, the mxrun binaries it
// runs) was built with AddressSanitizer. Memory bounds in the tests are set for the plain build:
// under ASan every process maps shadow memory (mxrun starts at ~160 MiB resident instead of ~8)
// and every thread carries fake stacks, so a test that checks memory widens its bound by this.
#pragma once

namespace mxrun::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

}  // namespace mxrun::testing
