#include "server/engine/outcome.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace breakerd {
namespace {

TEST(OutcomeTest, HttpStatusClassesFollowTheTable) {
  const std::vector<std::pair<uint32_t, OutcomeClass>> cases = {
      {100, OutcomeClass::kSuccess},     {200, OutcomeClass::kSuccess},
      {204, OutcomeClass::kSuccess},     {301, OutcomeClass::kSuccess},
      {399, OutcomeClass::kSuccess},     {408, OutcomeClass::kTimeout},
      {504, OutcomeClass::kTimeout},     {500, OutcomeClass::kServerError},
      {502, OutcomeClass::kServerError}, {503, OutcomeClass::kServerError},
      {529, OutcomeClass::kServerError}, {599, OutcomeClass::kServerError},
      {429, OutcomeClass::kRateLimited}, {400, OutcomeClass::kBadRequest},
      {404, OutcomeClass::kBadRequest},  {409, OutcomeClass::kBadRequest},
      {422, OutcomeClass::kBadRequest},  {499, OutcomeClass::kBadRequest},
      {401, OutcomeClass::kAuthError},   {403, OutcomeClass::kAuthError},
  };
  for (const auto& [status, want] : cases) {
    RawOutcome raw;
    raw.http_status = status;
    auto got = Classify(raw);
    ASSERT_TRUE(got.ok()) << status;
    EXPECT_EQ(*got, want) << "http_status " << status;
  }
}

TEST(OutcomeTest, GrpcCodeClassesFollowTheTable) {
  const std::vector<std::pair<int32_t, OutcomeClass>> cases = {
      {0, OutcomeClass::kSuccess},          {1, OutcomeClass::kCancelled},
      {2, OutcomeClass::kServerError},      {3, OutcomeClass::kBadRequest},
      {4, OutcomeClass::kTimeout},          {5, OutcomeClass::kBadRequest},
      {6, OutcomeClass::kBadRequest},       {7, OutcomeClass::kAuthError},
      {8, OutcomeClass::kRateLimited},      {9, OutcomeClass::kBadRequest},
      {10, OutcomeClass::kBadRequest},      {11, OutcomeClass::kBadRequest},
      {12, OutcomeClass::kBadRequest},      {13, OutcomeClass::kServerError},
      {14, OutcomeClass::kConnectionError}, {15, OutcomeClass::kServerError},
      {16, OutcomeClass::kAuthError},
  };
  for (const auto& [code, want] : cases) {
    RawOutcome raw;
    raw.grpc_code = code;
    auto got = Classify(raw);
    ASSERT_TRUE(got.ok()) << code;
    EXPECT_EQ(*got, want) << "grpc_code " << code;
  }
}

TEST(OutcomeTest, ExplicitOutcomeWinsOverStatusAndCode) {
  RawOutcome raw;
  raw.explicit_class = static_cast<int>(OutcomeClass::kSoftFailure);
  raw.http_status = 500;
  raw.grpc_code = 14;
  EXPECT_EQ(*Classify(raw), OutcomeClass::kSoftFailure);
  raw.explicit_class = 0;
  EXPECT_EQ(*Classify(raw), OutcomeClass::kServerError);  // http wins
}

TEST(OutcomeTest, OutOfRangeInputIsRefusedNamingTheField) {
  RawOutcome none;
  EXPECT_EQ(Classify(none).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Classify(none).status().message().find("outcome"),
            std::string::npos);

  RawOutcome http;
  http.http_status = 600;
  EXPECT_NE(Classify(http).status().message().find("http_status"),
            std::string::npos);
  http.http_status = 99;
  EXPECT_FALSE(Classify(http).ok());

  RawOutcome grpc;
  grpc.grpc_code = 17;
  EXPECT_NE(Classify(grpc).status().message().find("grpc_code"),
            std::string::npos);
  grpc.grpc_code = -1;
  EXPECT_FALSE(Classify(grpc).ok());

  RawOutcome bad_enum;
  bad_enum.explicit_class = 10;
  EXPECT_NE(Classify(bad_enum).status().message().find("outcome"),
            std::string::npos);
}

TEST(OutcomeTest, VerdictsMatchTheTable) {
  const auto count = RateLimitedHandling::kCount;
  EXPECT_EQ(VerdictFor(OutcomeClass::kSuccess, count), Verdict::kSuccess);
  EXPECT_EQ(VerdictFor(OutcomeClass::kSoftFailure, count), Verdict::kSuccess);
  EXPECT_EQ(VerdictFor(OutcomeClass::kTimeout, count), Verdict::kFailure);
  EXPECT_EQ(VerdictFor(OutcomeClass::kConnectionError, count),
            Verdict::kFailure);
  EXPECT_EQ(VerdictFor(OutcomeClass::kServerError, count), Verdict::kFailure);
  EXPECT_EQ(VerdictFor(OutcomeClass::kRateLimited, count), Verdict::kFailure);
  EXPECT_EQ(
      VerdictFor(OutcomeClass::kRateLimited, RateLimitedHandling::kIgnore),
      Verdict::kNeutral);
  EXPECT_EQ(VerdictFor(OutcomeClass::kBadRequest, count), Verdict::kNeutral);
  EXPECT_EQ(VerdictFor(OutcomeClass::kAuthError, count), Verdict::kNeutral);
  EXPECT_EQ(VerdictFor(OutcomeClass::kCancelled, count), Verdict::kNeutral);
}

TEST(OutcomeTest, EveryClassNameParsesBackAndOthersDoNot) {
  for (int i = 1; i < kOutcomeClassCount; ++i) {
    const OutcomeClass c = static_cast<OutcomeClass>(i);
    EXPECT_EQ(OutcomeClassFromName(OutcomeClassName(c)), c)
        << OutcomeClassName(c);
  }
  EXPECT_EQ(OutcomeClassFromName("unknown"), std::nullopt);
  EXPECT_EQ(OutcomeClassFromName("Timeout"), std::nullopt);
  EXPECT_EQ(OutcomeClassFromName(""), std::nullopt);
}

TEST(OutcomeTest, GrpcCodeNamesAreTheSpecsAndUnknownOutside) {
  EXPECT_EQ(GrpcCodeName(0), "OK");
  EXPECT_EQ(GrpcCodeName(4), "DEADLINE_EXCEEDED");
  EXPECT_EQ(GrpcCodeName(14), "UNAVAILABLE");
  EXPECT_EQ(GrpcCodeName(kGrpcCodeCount - 1), "UNAUTHENTICATED");
  EXPECT_EQ(GrpcCodeName(-1), "UNKNOWN");
  EXPECT_EQ(GrpcCodeName(kGrpcCodeCount), "UNKNOWN");
}

}  // namespace
}  // namespace breakerd
