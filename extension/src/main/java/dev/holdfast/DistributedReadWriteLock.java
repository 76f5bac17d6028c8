package dev.holdfast;

import java.util.concurrent.locks.ReadWriteLock;

/**
 * A distributed read-write lock: any number of readers, in any processes, or one writer.
 *
 * <pre>{@code
 * DistributedReadWriteLock prices = locks.getReadWriteLock("prices");
 * prices.readLock().lock();          // many threads and processes may read at once
 * try {
 *   return load();
 * } finally {
 *   prices.readLock().unlock();
 * }
 * }</pre>
 *
 * <p>Both sides are {@link DistributedLock}s with the exclusive lock's contract (leases, the
 * watchdog, waiting without polling, lost-lock reporting), and these rules:
 * <ol>
 *   <li>The read lock is held by any number of threads at once while no one holds the write
 *       lock; the write lock by one thread while no one else holds either side.</li>
 *   <li>Both are reentrant. The write holder may take the read lock too and then release the
 *       write lock: it is downgraded to a reader, and nobody else can write in between.</li>
 *   <li>There is no upgrade: a thread holding only the read lock that asks for the write lock
 *       would wait for itself for ever. A call that would wait ({@code lock()},
 *       {@code lockInterruptibly()}, {@code tryLock} with a positive wait) throws
 *       {@link IllegalStateException} at once; one that does not wait ({@code tryLock()},
 *       {@code tryLock} with a wait of zero or less) returns {@code false}, as with
 *       {@code ReentrantReadWriteLock} and Redisson. Redis is not asked either way. Only a read
 *       hold the thread still has counts: after its read hold was lost (force-unlocked, or its
 *       fixed lease ran out; {@code isHeldByCurrentThread()} is false), the write lock is
 *       acquired as usual, and the lost read sections still report the loss when unlocked.</li>
 *   <li>Each reader's lease is its own: a reader whose process died stops blocking writers when
 *       its own lease ends, however long other readers keep theirs, and never shortens theirs.</li>
 *   <li>The Redis layout is Redisson's {@code RReadWriteLock}: Holdfast and Redisson processes
 *       exclude each other on the same name and wake each other's waiters.</li>
 * </ol>
 *
 * <p>Handles are cheap, immutable and thread-safe; they hold no state of their own.
 */
public interface DistributedReadWriteLock extends ReadWriteLock {

  /** {@return the lock's name, as given to {@link LockClient#getReadWriteLock(String)}} */
  String getName();

  /** {@return the shared side: held by any number of readers while nobody writes} */
  @Override
  DistributedLock readLock();

  /**
   * {@return the exclusive side: one writer, no readers but the writer's own} Asked for by a
   * thread that holds only the read lock, it returns {@code false} from a call that does not
   * wait and throws {@link IllegalStateException} from one that would (rule 3 above).
   */
  @Override
  DistributedLock writeLock();
}
