#include "trainer/sha256.h"

#include <catch2/catch.hpp>

#include <string>

namespace mxrun::trainer {
namespace {

std::string Digest(const std::string& text) {
  Sha256 hash;
  hash.Update(text);
  return hash.HexDigest();
}

TEST_CASE("SHA-256 gives FIPS 180-4's test vectors", "[trainer][sha256]") {
  CHECK(Digest("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(Digest(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256 gives the same digest however the input is split", "[trainer][sha256]") {
  const std::string text(1000, 'x');
  for (size_t cut : {size_t{0}, size_t{1}, size_t{55}, size_t{56}, size_t{63}, size_t{64},
                     size_t{65}, size_t{999}}) {
    Sha256 hash;
    hash.Update(text.data(), cut);
    hash.Update(text.data() + cut, text.size() - cut);
    CHECK(hash.HexDigest() == Digest(text));
  }
}

}  // namespace
}  // namespace mxrun::trainer
