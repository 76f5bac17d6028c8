package dev.holdfast;

import jakarta.inject.Qualifier;
import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Qualifies an injected {@link DistributedLock} as the fair lock of its {@code @Named} name (see
 * {@link LockClient#getFairLock(String)}): waiters acquire in the order they started waiting.
 *
 * <pre>{@code
 * @Inject @Named("payouts") @Fair DistributedLock payouts;
 * }</pre>
 */
@Qualifier
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.FIELD, ElementType.PARAMETER, ElementType.METHOD, ElementType.TYPE})
public @interface Fair {
}
