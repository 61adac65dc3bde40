#include "launcher/report/error_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace ddprun::launcher {
namespace {

TEST(ParseErrorFile, NestedFormatAsPyTorchRecordWritesIt) {
  auto content = parse_error_file(R"({"message": {"message": "ValueError: boom", "extraInfo": {
      "py_callstack": "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    main()\nValueError: boom\n",
      "timestamp": "1700000000"}}})");
  ASSERT_TRUE(content);
  EXPECT_EQ(content->message, "ValueError: boom");
  EXPECT_EQ(content->traceback,
            "Traceback (most recent call last):\n"
            "  File \"train.py\", line 3, in <module>\n"
            "    main()\n"
            "ValueError: boom\n");
  EXPECT_EQ(content->timestamp_s, 1700000000);
}

TEST(ParseErrorFile, FlatFormat) {
  auto content = parse_error_file(R"({"message": "worker ran out of patience", "timestamp": 1700000123})");
  ASSERT_TRUE(content);
  EXPECT_EQ(content->message, "worker ran out of patience");
  EXPECT_EQ(content->traceback, "");
  EXPECT_EQ(content->timestamp_s, 1700000123);
}

TEST(ParseErrorFile, TimestampMayBeNumberOrStringInEitherFormat) {
  EXPECT_EQ(parse_error_file(R"({"message": {"extraInfo": {"timestamp": 42}}})")->timestamp_s, 42);
  EXPECT_EQ(parse_error_file(R"({"message": "m", "timestamp": "43"})")->timestamp_s, 43);
  EXPECT_EQ(parse_error_file(R"({"message": "m", "timestamp": 44.9})")->timestamp_s, 44);
  EXPECT_FALSE(parse_error_file(R"({"message": "m", "timestamp": "soon"})")->timestamp_s);
  EXPECT_FALSE(parse_error_file(R"({"message": "m", "timestamp": "12abc"})")->timestamp_s);
  EXPECT_FALSE(parse_error_file(R"({"message": "m", "timestamp": 1e300})")->timestamp_s);
  EXPECT_FALSE(parse_error_file(R"({"message": "m", "timestamp": 18446744073709551615})")->timestamp_s);
}

TEST(ParseErrorFile, MissingFieldsStayEmpty) {
  auto no_extra_info = parse_error_file(R"({"message": {"message": "RuntimeError: x"}})");
  ASSERT_TRUE(no_extra_info);
  EXPECT_EQ(no_extra_info->message, "RuntimeError: x");
  EXPECT_EQ(no_extra_info->traceback, "");
  EXPECT_FALSE(no_extra_info->timestamp_s);

  auto no_message = parse_error_file(R"({"message": {"extraInfo": {"py_callstack": "tb"}}})");
  ASSERT_TRUE(no_message);
  EXPECT_EQ(no_message->message, "");
  EXPECT_EQ(no_message->traceback, "tb");

  auto empty = parse_error_file("{}");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->message, "");
  EXPECT_FALSE(empty->timestamp_s);
}

TEST(ParseErrorFile, MistypedFieldsAreIgnored) {
  auto content = parse_error_file(R"({"message": {"message": 7, "extraInfo": ["not", "an", "object"]}})");
  ASSERT_TRUE(content);
  EXPECT_EQ(content->message, "");
  EXPECT_EQ(content->traceback, "");
  EXPECT_EQ(parse_error_file(R"({"message": null})")->message, "");
}

TEST(ParseErrorFile, NothingForInvalidJsonOrNonObject) {
  EXPECT_FALSE(parse_error_file(""));
  EXPECT_FALSE(parse_error_file(R"({"message": )"));
  EXPECT_FALSE(parse_error_file("not json"));
  EXPECT_FALSE(parse_error_file(R"(["message"])"));
  EXPECT_FALSE(parse_error_file(R"("message")"));
  EXPECT_FALSE(parse_error_file("null"));
}

class ReadErrorFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ddprun_error_file_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path write(const std::string& name, const std::string& text) {
    auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(ReadErrorFile, ReadsAndParses) {
  auto content = read_error_file(write("error.json", R"({"message": "m", "timestamp": 5})"));
  ASSERT_TRUE(content);
  EXPECT_EQ(content->message, "m");
  EXPECT_EQ(content->timestamp_s, 5);
}

TEST_F(ReadErrorFile, NothingWhenMissingUnparseableOrNotAFile) {
  EXPECT_FALSE(read_error_file(dir_ / "absent.json"));
  EXPECT_FALSE(read_error_file(write("half.json", R"({"message": {"mess)")));
  EXPECT_FALSE(read_error_file(write("empty.json", "")));
  EXPECT_FALSE(read_error_file(dir_));
}

TEST_F(ReadErrorFile, NothingWhenTooLarge) {
  std::string huge = R"({"message": ")" + std::string(kMaxErrorFileBytes, 'x') + R"("})";
  EXPECT_FALSE(read_error_file(write("huge.json", huge)));
}

}  // namespace
}  // namespace ddprun::launcher
