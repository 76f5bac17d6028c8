package dev.holdfast.engine;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/** A Lua script and its SHA-1, computed once so that calls can use {@code EVALSHA}. */
final class LockScript {
  private final String name;
  private final String source;
  private final String sha1;

  LockScript(String name, String source) {
    this.name = name;
    this.source = source;
    this.sha1 = sha1(source);
  }

  String name() {
    return name;
  }

  String source() {
    return source;
  }

  String sha1() {
    return sha1;
  }

  private static String sha1(String text) {
    try {
      byte[] digest = MessageDigest.getInstance("SHA-1")
          .digest(text.getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(digest);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-1 is required of every JVM", e);
    }
  }

  @Override
  public String toString() {
    return name;
  }
}
