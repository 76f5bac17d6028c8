package dev.holdfast.cdi;

import dev.holdfast.Locked;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Parameter;
import java.util.Arrays;
import java.util.List;

/**
 * A method that carries {@link Locked}, described without reflection or CDI language-model types
 * so that the portable extension (reflection), the build-compatible extension (language model)
 * and {@link LockedOperations} (reflection, at deployment or startup) share one validation.
 *
 * @param className      the name of the class that declares the method
 * @param methodName     the method's name
 * @param parameterTypes simple names of the parameter types, for messages
 * @param parameterNames the parameter names ({@code arg0}... without {@code -parameters})
 * @param modifiers      the method's {@link Modifier} bits
 * @param classFinal     whether the bean class is final
 * @param classLevel     whether the annotation comes from the class rather than the method
 * @param value          {@link Locked#value()}
 * @param waitTime       {@link Locked#waitTime()}
 * @param leaseTime      {@link Locked#leaseTime()}
 * @param fenced         {@link Locked#fenced()}
 * @param mode           {@link Locked#mode()}
 * @param skipIfBusy     {@link Locked#skipIfBusy()}
 * @param holdAtLeast    {@link Locked#holdAtLeast()}
 * @param onLoss         {@link Locked#onLoss()}
 * @param returnType     the simple name of the method's return type ({@code void}...), for
 *                       {@code skipIfBusy}, which only a void or asynchronous method can have
 * @param returnTypes    the return type's class name, then the names of its supertypes (for
 *                       {@link LockedReturn}); empty for {@code void} and primitives
 */
record LockedTarget(String className, String methodName, List<String> parameterTypes,
    List<String> parameterNames, int modifiers, boolean classFinal, boolean classLevel,
    String value, String waitTime, String leaseTime, boolean fenced, Locked.Mode mode,
    boolean skipIfBusy, String holdAtLeast, Locked.OnLoss onLoss, String returnType,
    List<String> returnTypes) {

  /**
   * Describes {@code method} of {@code beanClass} as annotated by {@code locked}. The method's
   * declaring class names the default lock and the config keys.
   */
  static LockedTarget of(Class<?> beanClass, Method method, Locked locked, boolean classLevel) {
    return new LockedTarget(method.getDeclaringClass().getName(), method.getName(),
        Arrays.stream(method.getParameterTypes()).map(Class::getSimpleName).toList(),
        Arrays.stream(method.getParameters()).map(Parameter::getName).toList(),
        method.getModifiers(), Modifier.isFinal(beanClass.getModifiers()), classLevel,
        locked.value(), locked.waitTime(), locked.leaseTime(), locked.fenced(), locked.mode(),
        locked.skipIfBusy(), locked.holdAtLeast(), locked.onLoss(),
        method.getReturnType().getSimpleName(),
        method.getReturnType().isPrimitive() ? List.of()
            : LockedReturn.namesOf(method.getReturnType()));
  }

  /** When the method's work is done, as its return type says. */
  LockedReturn returns() {
    return LockedReturn.of(returnTypes);
  }

  /**
   * Whether a skipped call can return: the method returns nothing, or a stage or {@code Uni} that
   * then completes with {@code null}.
   */
  boolean skippable() {
    return returnType.equals("void") || returns() != LockedReturn.SYNC;
  }

  /** {@code com.acme.Inventory.reserve(String, int)}, for messages. */
  String where() {
    return className + "." + methodName + "(" + String.join(", ", parameterTypes) + ")";
  }

  /** The config key {@code holdfast."<fqcn>/<method>".locked.<member>}. */
  String methodKey(String member) {
    return "holdfast.\"" + className + "/" + methodName + "\".locked." + member;
  }

  /** The config key {@code holdfast."<fqcn>".locked.<member>}. */
  String classKey(String member) {
    return "holdfast.\"" + className + "\".locked." + member;
  }
}
