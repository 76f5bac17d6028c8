/**
 * The CDI adapter: a portable {@code Extension} for CDI Full containers (Weld: WildFly,
 * weld-junit5, Open Liberty, Payara) and a {@code BuildCompatibleExtension} for CDI Lite (Quarkus
 * ArC), the {@link dev.holdfast.Locked @Locked} interceptor, {@code @Named} lock beans and the
 * {@link dev.holdfast.LockClient} producer reading MicroProfile Config.
 *
 * <p><b>Not API</b>, except through the annotations and types of {@code dev.holdfast}. Both
 * extensions describe what they find as {@link dev.holdfast.cdi.LockedTarget}s and hand them to
 * the same validation and preparation code, so both containers behave alike.
 *
 * <p>What a loss does to running {@code @Locked} calls lives here too: the commit guard
 * ({@link dev.holdfast.cdi.TransactionGuard}, which {@code dev.holdfast.CommitGuard} uses as
 * well, fed by the calls running on each thread and the container's announcement of each
 * transaction it begins), and the interruption or cancellation of a call whose hold is reported
 * lost ({@code LossActions}). The classes that name JTA's types are loaded only when JTA is on
 * the class path.
 */
package dev.holdfast.cdi;
