// A yaml-cpp event handler that ignores every event, for code that walks a
// YAML stream with YAML::Parser without building nodes (the config loader
// counts documents this way; fuzz/config_fuzz checks it the same way).
// Subclasses override the events they want.
//
// Thread-safety: a handler belongs to the one parser that calls it.
#ifndef BREAKERD_SERVER_CONFIG_YAML_EVENTS_H_
#define BREAKERD_SERVER_CONFIG_YAML_EVENTS_H_

#include <string>

#include "yaml-cpp/eventhandler.h"

namespace breakerd {

class IgnoringEventHandler : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_CONFIG_YAML_EVENTS_H_
