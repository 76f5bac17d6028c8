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

  /**
   * Every lock script may be asked, by a last argument {@code auto}, to report how many replicas
   * are connected to the server that ran it, so that the caller knows whether to {@code WAIT}
   * without another round trip: it then returns {@code {result, replicas}}. Scripts read their
   * arguments by position, so the extra last one is invisible to them.
   */
  private static final String REPORT_REPLICAS = """
      local function run()
      %s
      end
      local result = run()
      if ARGV[#ARGV] == 'auto' then
        local info = redis.call('info', 'replication')
        if string.find(info, 'connected_slaves:0\\r', 1, true) then
          return {result, 0}
        end
        return {result, tonumber(string.match(info, 'connected_slaves:(%%d+)')) or 0}
      end
      return result
      """;

  LockScript(String name, String body) {
    this.name = name;
    this.source = REPORT_REPLICAS.formatted(body);
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
