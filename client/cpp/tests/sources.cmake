# The sources of the C++ client's test binary (client_cpp_test), relative to
# client/cpp/tests: one list for breakerd's tree (client/CMakeLists.txt) and
# for the client built on its own (tests/CMakeLists.txt, test.sh).
set(BREAKERD_CLIENT_CPP_TEST_SOURCES
  chain_test.cc
  change_log_test.cc
  client_fixture.cc
  client_test.cc
  conformance_test.cc
  late_answer_test.cc
  local_batch_test.cc
  local_decisions_test.cc
  send_window_test.cc
  watch_cache_test.cc
)
