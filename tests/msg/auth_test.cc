// AuthConfig::FromKeyringFile (msg/auth.cc): what a keyring file may look like, and what
// the error says when it is not usable. The three secret encodings themselves (base64
// with '=', even-length hex, raw text) are also checked by messenger_test's
// AuthTest.KeyringFormats; this suite covers the file around them.
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "msg/messenger.h"

namespace msgr {
namespace {

class KeyringTest : public ::testing::Test {
 protected:
  // Writes `text` exactly as given (no newline added) to a new file and returns its path.
  std::string Write(const std::string& text) {
    const char* dir = std::getenv("TEST_TMPDIR");
    std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/auth_test.keyring.",
                                    ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                    ".", counter_++);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    EXPECT_TRUE(out) << "cannot write " << path;
    return path;
  }

  // The secret read from a file holding `text` (a failed read fails the test).
  std::string SecretOf(const std::string& text) {
    auto c = AuthConfig::FromKeyringFile(Write(text));
    EXPECT_TRUE(c.ok()) << c.status() << "\nfile:\n" << text;
    if (!c.ok()) return "<error>";
    EXPECT_EQ(c->mode, AuthConfig::Mode::kSecret);
    return c->secret;
  }

  // The error for a file holding `text`; its message must name the file.
  absl::Status ErrorOf(const std::string& text) {
    const std::string path = Write(text);
    auto c = AuthConfig::FromKeyringFile(path);
    EXPECT_FALSE(c.ok()) << "accepted, secret '" << (c.ok() ? c->secret : "") << "'";
    if (c.ok()) return absl::OkStatus();
    EXPECT_NE(c.status().message().find(absl::StrCat("'", path, "'")), std::string::npos)
        << "the error does not name the file: " << c.status();
    return c.status();
  }

  int counter_ = 0;
};

bool Contains(const absl::Status& s, const std::string& what) {
  return s.message().find(what) != absl::string_view::npos;
}

TEST_F(KeyringTest, MissingFileIsNotFoundNamingThePathAndHowToCreateIt) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/no-such-dir/keyring");
  auto c = AuthConfig::FromKeyringFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound) << c.status();
  EXPECT_TRUE(Contains(c.status(), absl::StrCat("'", path, "'"))) << c.status();
  EXPECT_TRUE(Contains(c.status(), "key = <secret>")) << c.status();
}

TEST_F(KeyringTest, FileWithoutAKeyLineIsInvalidArgumentSayingSo) {
  for (const std::string& text : {
           std::string(""),
           std::string("\n\n   \n"),
           std::string("[client.admin]\n"),
           std::string("# key = commented-out\n; key = also-commented-out\n"),
           std::string("nokey here\njust words\n"),
           std::string("keyring = /etc/ceph/keyring\nmykey = x\nkey2 = y\nKEY = z\n"),
           std::string("[key = in a section header]\n"),
       }) {
    SCOPED_TRACE(text);
    const absl::Status s = ErrorOf(text);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(Contains(s, "has no 'key = <secret>' line")) << s;
  }
}

TEST_F(KeyringTest, EmptyKeyNamesTheFileAndItsLine) {
  // Line 4: blank, comment and section lines count.
  absl::Status s = ErrorOf("[client.admin]\n\n# the key:\nkey =\nkey = later\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(Contains(s, "line 4: empty key")) << s;
  s = ErrorOf("key =    \t  \r\n");
  EXPECT_TRUE(Contains(s, "line 1: empty key")) << s;
  s = ErrorOf("\nkey = hex:\n");  // an explicit encoding with nothing after it
  EXPECT_TRUE(Contains(s, "line 2: empty key")) << s;
}

TEST_F(KeyringTest, CephKeyringWithSectionIndentAndCapsLines) {
  EXPECT_EQ(SecretOf("[client.admin]\n"
                     "\tkey = QUJDREVGR0g=\n"
                     "\tcaps mon = \"allow *\"\n"
                     "\tcaps osd = \"allow *\"\n"),
            "ABCDEFGH");
  // caps before the key, no trailing newline at the end of the file.
  EXPECT_EQ(SecretOf("[osd.0]\ncaps osd = \"allow *\"\n  key = QUJDREVGR0g="), "ABCDEFGH");
}

TEST_F(KeyringTest, WhitespaceAroundKeyAndValueIsIgnored) {
  for (const std::string line : {"key=s3cret", "key =s3cret", "key= s3cret", "  key  =  s3cret  ",
                                 "\tkey\t=\ts3cret\t", "key = s3cret\r", " \t key = s3cret \r"}) {
    SCOPED_TRACE(line);
    EXPECT_EQ(SecretOf(line + "\n"), "s3cret");
  }
  // Whitespace inside a raw secret is kept.
  EXPECT_EQ(SecretOf("key = two words\n"), "two words");
}

TEST_F(KeyringTest, WindowsLineEndingsThroughout) {
  EXPECT_EQ(SecretOf("[client.admin]\r\n# comment\r\n\r\nkey = 0a0b0c0d\r\n"),
            std::string("\x0a\x0b\x0c\x0d", 4));
}

TEST_F(KeyringTest, CommentsAndOtherLinesBeforeTheKeyAreSkipped) {
  EXPECT_EQ(SecretOf("# key = old-secret\n"
                     "; key = older-secret\n"
                     "   # key = indented-comment\n"
                     "not a setting\n"
                     "keyring = /somewhere/else\n"
                     "mon host = 127.0.0.1\n"
                     "key = the-secret\n"),
            "the-secret");
}

TEST_F(KeyringTest, TheFirstKeyLineWinsWhateverItsSection) {
  EXPECT_EQ(SecretOf("[client.admin]\nkey = first\n[osd.1]\nkey = second\n"), "first");
  EXPECT_EQ(SecretOf("[client.a]\ncaps mon = x\n[client.b]\nkey = only\n"), "only");
}

TEST_F(KeyringTest, ValueMayContainEqualsSigns) {
  // The line splits at its first '='; the rest is the value.
  EXPECT_EQ(SecretOf("key = a=b=c\n"), "a=b=c");
  EXPECT_EQ(SecretOf("key==lead\n"), "=lead");
}

TEST_F(KeyringTest, ExplicitEncodingPrefixes) {
  EXPECT_EQ(SecretOf("key = hex:41424344\n"), "ABCD");
  EXPECT_EQ(SecretOf("key = hex:DEADbeef\n"), std::string("\xde\xad\xbe\xef", 4));
  // base64 without padding is only recognised with its prefix...
  EXPECT_EQ(SecretOf("key = base64:QUJDRA\n"), "ABCD");
  // ...and without it is taken as raw text.
  EXPECT_EQ(SecretOf("key = QUJDRA\n"), "QUJDRA");
}

TEST_F(KeyringTest, UnprefixedValuesAreGuessedBase64ThenHexThenRaw) {
  EXPECT_EQ(SecretOf("key = QUJDRA==\n"), "ABCD");                      // padded base64
  EXPECT_EQ(SecretOf("key = 00ff\n"), std::string("\x00\xff", 2));      // even-length hex
  EXPECT_EQ(SecretOf("key = 00f\n"), "00f");                            // odd length: raw
  EXPECT_EQ(SecretOf("key = 00fg\n"), "00fg");                          // not hex: raw
  EXPECT_EQ(SecretOf("key = not base64!=\n"), "not base64!=");          // '=' but not base64
}

// An explicit "hex:" or "base64:" says what the value is: a value that is not that is a
// mistake in the file, not a different key (absl's HexStringToBytes would turn "hex:zz"
// into one zero byte and drop the last digit of an odd-length value).
TEST_F(KeyringTest, MalformedPrefixedValueIsAnErrorNamingFileLineAndEncoding) {
  struct Case {
    const char* text;
    const char* what;
  };
  for (const Case& c : {Case{"\nkey = hex:zz\n", "line 2: 'hex:' value is not"},
                        Case{"key = hex:0011223\n", "line 1: 'hex:' value is not"},
                        Case{"key = hex:00 11\n", "line 1: 'hex:' value is not"},
                        Case{"#\n#\nkey = base64:!!!!\n", "line 3: 'base64:' value is not"},
                        Case{"key = base64:QUJD=\n", "line 1: 'base64:' value is not"}}) {
    SCOPED_TRACE(c.text);
    const absl::Status s = ErrorOf(c.text);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(Contains(s, c.what)) << s;
  }
}

// A path that opens but cannot be read (a directory: `--keyring` given the cluster
// directory instead of the keyring in it) must say so, not that the file has no key line.
TEST_F(KeyringTest, UnreadablePathSaysItCannotBeRead) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = dir != nullptr ? dir : "/tmp";
  auto c = AuthConfig::FromKeyringFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  EXPECT_TRUE(Contains(c.status(), absl::StrCat("cannot read keyring file '", path, "'")))
      << c.status();
  EXPECT_FALSE(Contains(c.status(), "has no 'key")) << c.status();
}

}  // namespace
}  // namespace msgr
