package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import java.io.IOException;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/**
 * The set-up of the RedLock attack classes: members {@code q0, q1, q2} on client {@link #b},
 * which talks through a {@link CommandProxy} so that a chosen member's script can be refused
 * ({@link #OOM}: not run) or held back; {@link #red} is their RedLock on {@code b}, and
 * {@link #rivalRed} the same members' RedLock on the fixture's rival client.
 */
abstract class ProxiedRedLockFixture extends ProxiedClientFixture {

  /** A refusal that means "not run". */
  static final String OOM = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";

  CommandProxy commands;
  LockClient b;
  LossRecorder losses;
  DistributedLock red;
  DistributedLock rivalRed;

  @BeforeEach
  void startCommandProxy() throws IOException {
    commands = new CommandProxy(redis.server().port());
    b = clients.create(Map.of(LockClientConfig.ADDRESS, commands.uri(),
        LockClientConfig.TIMEOUT, "2s", LockClientConfig.WATCHDOG_TIMEOUT, "30s"));
    DistributedLock warm = b.getLock("warm"); // scripts loaded
    warm.lock();
    warm.lock();
    warm.unlock();
    warm.unlock();
    losses = LossRecorder.on(b);
    red = b.getRedLock(b.getLock("q0"), b.getLock("q1"), b.getLock("q2"));
    rivalRed = rival.getRedLock(rival.getLock("q0"), rival.getLock("q1"), rival.getLock("q2"));
  }

  @AfterEach
  void stopCommandProxy() {
    commands.releaseAll();
    commands.close();
  }

  /** A script call (EVAL/EVALSHA) naming {@code key}. */
  static Predicate<List<String>> scriptOn(String key) {
    return args -> {
      if (!args.get(0).toUpperCase(Locale.ROOT).startsWith("EVAL")) {
        return false;
      }
      int end = args.indexOf(CommandProxy.AFTER);
      return args.subList(0, end < 0 ? args.size() : end).contains(key);
    };
  }

  /** The {@code n}th script call (EVAL/EVALSHA) naming {@code key}, counted from arming. */
  static Predicate<List<String>> nthScriptOn(String key, int n) {
    Predicate<List<String>> script = scriptOn(key);
    AtomicInteger seen = new AtomicInteger();
    return args -> script.test(args) && seen.incrementAndGet() == n;
  }

  /** Whether the rival client could take {@code key} alone right now (released again if so). */
  boolean rivalTakes(String key) {
    DistributedLock l = rival.getLock(key);
    boolean took = l.tryLock();
    if (took) {
      l.unlock();
    }
    return took;
  }
}
