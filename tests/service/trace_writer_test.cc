#include "server/service/trace_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace breakerd {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

TEST(TraceWriterTest, WritesOneLinePerReportInTheSimulateFormat) {
  const std::string path = testing::TempDir() + "/trace_format.jsonl";
  std::remove(path.c_str());
  auto writer = TraceWriter::Open(path, 1 << 20);
  ASSERT_TRUE(writer.ok()) << writer.status();
  v1::ReportRequest report;
  report.set_dependency("llm/a");
  report.set_outcome(v1::OUTCOME_TIMEOUT);
  report.mutable_latency()->set_seconds(1);
  report.mutable_latency()->set_nanos(500000000);
  (*writer)->Record(report);
  report.clear_outcome();
  report.clear_latency();
  report.set_grpc_code(14);
  (*writer)->Record(report);
  const std::string text = ReadAll(path);
  EXPECT_TRUE(
      absl::StrContains(text,
                        "\"dependency\":\"llm/a\",\"outcome\":\"timeout\","
                        "\"latency_ms\":1500}\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "\"grpc_code\":14}\n")) << text;
  EXPECT_TRUE(absl::StartsWith(text, "{\"t\":\"")) << text;
}

TEST(TraceWriterTest, StopsAtItsSizeBoundAndCountsWhatItDrops) {
  const std::string path = testing::TempDir() + "/trace_bound.jsonl";
  std::remove(path.c_str());
  auto writer = TraceWriter::Open(path, 300);
  ASSERT_TRUE(writer.ok());
  v1::ReportRequest report;
  report.set_dependency("llm/bounded");
  report.set_http_status(503);
  for (int i = 0; i < 20; ++i) (*writer)->Record(report);
  const std::string text = ReadAll(path);
  EXPECT_LE(text.size(), 300u);
  EXPECT_GT(text.size(), 0u);
  EXPECT_EQ(text.back(), '\n');  // never a partial line
  const size_t lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_EQ((*writer)->dropped(), 20 - lines);
}

TEST(TraceWriterTest, UnwritablePathIsAnErrorNamingIt) {
  auto writer = TraceWriter::Open("/nonexistent-dir/trace.jsonl", 100);
  ASSERT_FALSE(writer.ok());
  EXPECT_TRUE(absl::StrContains(writer.status().message(),
                                "/nonexistent-dir/trace.jsonl"));
}

// The trace names every dependency: created owner-only whatever the umask.
TEST(TraceWriterTest, CreatesTheFileOwnerOnly) {
  const std::string path = testing::TempDir() + "/trace_mode.jsonl";
  std::remove(path.c_str());
  const mode_t old_umask = ::umask(0);
  auto writer = TraceWriter::Open(path, 100);
  ::umask(old_umask);
  ASSERT_TRUE(writer.ok()) << writer.status();
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << std::oct << (st.st_mode & 07777);
}

// A symlink planted at the trace path must not redirect the writes.
TEST(TraceWriterTest, APlantedSymlinkIsNotFollowed) {
  const std::string target = testing::TempDir() + "/trace_target.txt";
  const std::string path = testing::TempDir() + "/trace_link.jsonl";
  std::remove(path.c_str());
  std::ofstream(target) << "precious\n";
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  auto writer = TraceWriter::Open(path, 1000);
  EXPECT_FALSE(writer.ok());
  if (writer.ok()) {
    v1::ReportRequest report;
    report.set_dependency("svc/a");
    (*writer)->Record(report);
  }
  writer = absl::InternalError("closed");
  EXPECT_EQ(ReadAll(target), "precious\n");
  std::remove(path.c_str());
  std::remove(target.c_str());
}

}  // namespace
}  // namespace breakerd
