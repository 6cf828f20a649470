package io.breakerd.client;

/**
 * breakerd's name rule, checked before a name is sent where breakerd would
 * refuse it: 1-200 characters of {@value #ALPHABET} (server/engine/dependency_name.h).
 */
final class Names {
  /** The characters a name may use, as breakerd's errors write them. */
  static final String ALPHABET = "[A-Za-z0-9._:/@-]";

  /** The longest name breakerd takes. */
  static final int MAX_LENGTH = 200;

  private Names() {}

  /**
   * Checks {@code name}, the value of {@code field}.
   *
   * @throws IllegalArgumentException naming {@code field}, if {@code name} is null or breaks the rule
   */
  static String check(String name, String field) {
    if (name == null || name.isEmpty() || name.length() > MAX_LENGTH
        || !name.chars().allMatch(Names::allowed)) {
      throw new IllegalArgumentException(field + ": " + (name == null ? "null" : "'" + name + "'")
          + " must be 1-" + MAX_LENGTH + " characters of " + ALPHABET);
    }
    return name;
  }

  private static boolean allowed(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
        || c == '.' || c == '_' || c == ':' || c == '/' || c == '@' || c == '-';
  }
}
