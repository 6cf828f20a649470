#include "server/engine/outcome.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace breakerd {
namespace {

constexpr absl::string_view kGrpcCodeNames[kGrpcCodeCount] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

}  // namespace

OutcomeClass ClassifyHttpStatus(uint32_t status) {
  if (status < 400) return OutcomeClass::kSuccess;
  switch (status) {
    case 408:
    case 504:
      return OutcomeClass::kTimeout;
    case 429:
      return OutcomeClass::kRateLimited;
    case 401:
    case 403:
      return OutcomeClass::kAuthError;
    default:
      break;
  }
  return status < 500 ? OutcomeClass::kBadRequest : OutcomeClass::kServerError;
}

OutcomeClass ClassifyGrpcCode(int32_t code) {
  switch (code) {
    case 0:  // OK
      return OutcomeClass::kSuccess;
    case 1:  // CANCELLED: the caller gave up for its own reasons
      return OutcomeClass::kCancelled;
    case 4:  // DEADLINE_EXCEEDED
      return OutcomeClass::kTimeout;
    case 14:  // UNAVAILABLE
      return OutcomeClass::kConnectionError;
    case 8:  // RESOURCE_EXHAUSTED
      return OutcomeClass::kRateLimited;
    case 16:  // UNAUTHENTICATED
    case 7:   // PERMISSION_DENIED
      return OutcomeClass::kAuthError;
    case 3:   // INVALID_ARGUMENT
    case 5:   // NOT_FOUND
    case 6:   // ALREADY_EXISTS
    case 9:   // FAILED_PRECONDITION
    case 10:  // ABORTED: a conflict of this request, not the server's health
    case 11:  // OUT_OF_RANGE
    case 12:  // UNIMPLEMENTED
      return OutcomeClass::kBadRequest;
    default:  // UNKNOWN (2), INTERNAL (13), DATA_LOSS (15)
      return OutcomeClass::kServerError;
  }
}

absl::StatusOr<OutcomeClass> Classify(const RawOutcome& raw) {
  if (raw.explicit_class != 0) {
    if (raw.explicit_class < 1 || raw.explicit_class >= kOutcomeClassCount) {
      return absl::InvalidArgumentError(
          absl::StrCat("outcome: unknown value ", raw.explicit_class,
                       " (must be one of the Outcome enum values 1..9)"));
    }
    return static_cast<OutcomeClass>(raw.explicit_class);
  }
  if (raw.http_status != 0) {
    if (raw.http_status < 100 || raw.http_status > 599) {
      return absl::InvalidArgumentError(
          absl::StrCat("http_status: must be between 100 and 599 (got ",
                       raw.http_status, ")"));
    }
    return ClassifyHttpStatus(raw.http_status);
  }
  if (raw.grpc_code.has_value()) {
    if (*raw.grpc_code < 0 || *raw.grpc_code > 16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grpc_code: must be between 0 and 16 (got ", *raw.grpc_code, ")"));
    }
    return ClassifyGrpcCode(*raw.grpc_code);
  }
  return absl::InvalidArgumentError(
      "outcome: one of outcome, http_status or grpc_code must be set");
}

Verdict VerdictFor(OutcomeClass c, RateLimitedHandling rate_limited) {
  switch (c) {
    case OutcomeClass::kSuccess:
    case OutcomeClass::kSoftFailure:
      return Verdict::kSuccess;
    case OutcomeClass::kTimeout:
    case OutcomeClass::kConnectionError:
    case OutcomeClass::kServerError:
      return Verdict::kFailure;
    case OutcomeClass::kRateLimited:
      return rate_limited == RateLimitedHandling::kIgnore ? Verdict::kNeutral
                                                          : Verdict::kFailure;
    case OutcomeClass::kBadRequest:
    case OutcomeClass::kAuthError:
    case OutcomeClass::kCancelled:
      return Verdict::kNeutral;
  }
  return Verdict::kNeutral;
}

absl::string_view OutcomeClassName(OutcomeClass c) {
  switch (c) {
    case OutcomeClass::kSuccess:
      return "success";
    case OutcomeClass::kTimeout:
      return "timeout";
    case OutcomeClass::kConnectionError:
      return "connection_error";
    case OutcomeClass::kServerError:
      return "server_error";
    case OutcomeClass::kRateLimited:
      return "rate_limited";
    case OutcomeClass::kBadRequest:
      return "bad_request";
    case OutcomeClass::kAuthError:
      return "auth_error";
    case OutcomeClass::kCancelled:
      return "cancelled";
    case OutcomeClass::kSoftFailure:
      return "soft_failure";
  }
  return "unknown";
}

std::optional<OutcomeClass> OutcomeClassFromName(absl::string_view name) {
  for (int i = 1; i < kOutcomeClassCount; ++i) {
    const OutcomeClass c = static_cast<OutcomeClass>(i);
    if (OutcomeClassName(c) == name) return c;
  }
  return std::nullopt;
}

absl::string_view GrpcCodeName(int code) {
  return code >= 0 && code < kGrpcCodeCount ? kGrpcCodeNames[code] : "UNKNOWN";
}

}  // namespace breakerd
