package dev.holdfast.cdi;

import dev.holdfast.LockClient;
import jakarta.annotation.Priority;
import jakarta.inject.Inject;
import jakarta.interceptor.AroundInvoke;
import jakarta.interceptor.Interceptor;
import jakarta.interceptor.InvocationContext;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Records "begin" and "commit" like a transaction manager at {@code @Transactional}'s priority,
 * noting whether the method's lock was held at each moment.
 */
@TestTransactional
@Interceptor
@Priority(Interceptor.Priority.PLATFORM_BEFORE + 200)
public class TestTransactionInterceptor {
  static final List<String> EVENTS = new CopyOnWriteArrayList<>();

  @Inject
  LockClient client;

  @AroundInvoke
  Object around(InvocationContext ctx) throws Exception {
    String lock = "payment:" + ctx.getParameters()[0];
    EVENTS.add("begin, locked=" + client.getLock(lock).isLocked());
    Object result = ctx.proceed();
    EVENTS.add("commit, locked=" + client.getLock(lock).isLocked());
    return result;
  }
}
