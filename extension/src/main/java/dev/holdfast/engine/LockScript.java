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
   * of the server that ran it can acknowledge writes, so that the caller knows whether to
   * {@code WAIT} without another round trip: it then returns {@code {result, replicas}}. Scripts
   * read their arguments by position, so the extra last one is invisible to them.
   *
   * <p>Only replicas in state {@code online} count: {@code connected_slaves} also counts those in
   * their initial sync ({@code wait_bgsave}, {@code send_bulk}), which acknowledge nothing until
   * it ends — with Redis 7's 5 s diskless-sync delay, longer than a sync timeout — and could not
   * be promoted meanwhile either.
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
        local online = 0
        for _ in string.gmatch(info, 'slave%%d+:[^\\r\\n]*state=online') do
          online = online + 1
        end
        return {result, online}
      end
      return result
      """;

  /**
   * A cluster routes a command by its declared keys and refuses keys of several slots even for a
   * flagged script, so such a script declares none: its keys come first in ARGV, after their
   * count, and this prologue gives the body the KEYS and ARGV it expects.
   */
  private static final String ACROSS_SLOTS = """
      #!lua flags=allow-cross-slot-keys
      local count = tonumber(ARGV[1])
      local KEYS, rest = {}, {}
      for i = 1, count do
        KEYS[i] = ARGV[i + 1]
      end
      for i = count + 2, #ARGV do
        rest[#rest + 1] = ARGV[i]
      end
      local ARGV = rest
      """;

  private final String body;
  private final boolean crossSlot;

  LockScript(String name, String body) {
    this(name, body, false);
  }

  private LockScript(String name, String body, boolean crossSlot) {
    this.name = name;
    this.body = body;
    this.crossSlot = crossSlot;
    // Redis 7 lets a script flagged so touch keys of several slots, all served by the node
    // it runs on: one call can then cover a whole cluster node.
    this.source = (crossSlot ? ACROSS_SLOTS : "") + REPORT_REPLICAS.formatted(body);
    this.sha1 = sha1(source);
  }

  /**
   * This script for Redis 7+ clusters, allowed to take keys from several slots of the node it
   * runs on; it must be sent to that node directly (see {@link #crossSlot()}).
   */
  LockScript acrossSlots() {
    return new LockScript(name, body, true);
  }

  /** The keys to declare when sending the script with {@code keys}. */
  java.util.List<String> sentKeys(java.util.List<String> keys) {
    return crossSlot ? java.util.List.of() : keys;
  }

  /** The arguments to send with the script for {@code keys} and {@code args}. */
  java.util.List<String> sentArgs(java.util.List<String> keys, java.util.List<String> args) {
    if (!crossSlot) {
      return args;
    }
    java.util.List<String> all = new java.util.ArrayList<>(keys.size() + args.size() + 1);
    all.add(Integer.toString(keys.size()));
    all.addAll(keys);
    all.addAll(args);
    return all;
  }

  /** Whether the script takes keys from several slots of one cluster node. */
  boolean crossSlot() {
    return crossSlot;
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
