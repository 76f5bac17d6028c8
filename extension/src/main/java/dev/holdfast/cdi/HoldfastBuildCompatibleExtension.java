package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.Fair;
import dev.holdfast.Locked;
import jakarta.enterprise.context.Dependent;
import jakarta.enterprise.inject.build.compatible.spi.BeanInfo;
import jakarta.enterprise.inject.build.compatible.spi.BuildCompatibleExtension;
import jakarta.enterprise.inject.build.compatible.spi.Discovery;
import jakarta.enterprise.inject.build.compatible.spi.InjectionPointInfo;
import jakarta.enterprise.inject.build.compatible.spi.Messages;
import jakarta.enterprise.inject.build.compatible.spi.MetaAnnotations;
import jakarta.enterprise.inject.build.compatible.spi.Registration;
import jakarta.enterprise.inject.build.compatible.spi.ScannedClasses;
import jakarta.enterprise.inject.build.compatible.spi.SkipIfPortableExtensionPresent;
import jakarta.enterprise.inject.build.compatible.spi.Synthesis;
import jakarta.enterprise.inject.build.compatible.spi.SyntheticBeanBuilder;
import jakarta.enterprise.inject.build.compatible.spi.SyntheticComponents;
import jakarta.enterprise.inject.literal.NamedLiteral;
import jakarta.enterprise.lang.model.AnnotationInfo;
import jakarta.enterprise.lang.model.AnnotationMember;
import jakarta.enterprise.lang.model.declarations.ClassInfo;
import jakarta.enterprise.lang.model.declarations.DeclarationInfo;
import jakarta.enterprise.lang.model.declarations.MethodInfo;
import jakarta.enterprise.lang.model.declarations.ParameterInfo;
import jakarta.enterprise.lang.model.types.Type;
import jakarta.inject.Named;
import jakarta.inject.Singleton;
import java.lang.reflect.Modifier;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.EnumSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Holdfast for CDI Lite (Quarkus ArC), which runs only build-compatible extensions. The same
 * behaviour as {@link HoldfastExtension}, through the same validation code: the library's beans
 * are added as scanned classes, {@code @Locked} methods are checked as written at build time,
 * named locks become synthetic beans, and the bean classes with {@code @Locked} methods are
 * recorded in the synthetic {@link LockedOperations} bean, which prepares them all with the
 * run-time configuration when {@link HoldfastStartup} asks for it as the application starts: a
 * bad override or client key stops the start. Skipped where the portable extension runs.
 */
@SkipIfPortableExtensionPresent(HoldfastExtension.class)
public class HoldfastBuildCompatibleExtension implements BuildCompatibleExtension {
  /** The {@code @Named} lock beans to add: by name, their kinds. */
  private final Map<String, Set<NamedLocks.Kind>> lockBeans = new TreeMap<>();
  private final Map<String, ClassInfo> lockedBeanClasses = new TreeMap<>();

  /** For the container. */
  public HoldfastBuildCompatibleExtension() {
  }

  /**
   * ArC knows qualifiers from its bean archives' index, which need not hold the library's API
   * classes: without this, {@code @Fair} at an injection point was silently ignored.
   */
  @Discovery
  public void addQualifiers(MetaAnnotations meta) {
    meta.addQualifier(Fair.class);
  }

  @Discovery
  public void addLibraryBeans(ScannedClasses scanned) {
    for (Class<?> type : List.of(LockedInterceptor.class, HoldfastProducer.class,
        HoldfastStartup.class)) {
      scanned.add(type.getName());
    }
    // Build-time configuration in Quarkus: the check is in the application or it is not.
    if (HoldfastExtension.healthCheckWanted()) {
      scanned.add(HoldfastHealthCheck.class.getName());
    }
    if (LockedCalls.TRACKED) {
      scanned.add(OptionalApis.TRANSACTION_BEGUN); // the commit guard (JTA is there)
    }
  }

  @Registration(types = Object.class)
  public void inspect(BeanInfo bean, Messages messages) {
    for (InjectionPointInfo ip : bean.injectionPoints()) {
      collectNamedLock(ip, messages);
    }
    if (bean.isClassBean() && !bean.isInterceptor()) {
      List<LockedTarget> targets = targets(bean.declaringClass());
      for (LockedTarget target : targets) {
        LockedDefinitions.problems(target).forEach(p -> messages.error(p, bean));
      }
      if (mentionsLocked(bean.declaringClass())) {
        lockedBeanClasses.put(bean.declaringClass().name(), bean.declaringClass());
      }
    }
  }

  @Synthesis
  public void addBeans(SyntheticComponents components) {
    components.addBean(LockedOperations.class)
        .type(LockedOperations.class)
        .scope(Singleton.class)
        .withParam(LockedOperations.BEAN_CLASSES_PARAM,
            lockedBeanClasses.values().toArray(new ClassInfo[0]))
        .createWith(LockedOperations.Creator.class);
    lockBeans.forEach((name, kinds) -> {
      for (NamedLocks.Kind kind : kinds) {
        if (kind == NamedLocks.Kind.READ_WRITE) {
          var bean = components.addBean(DistributedReadWriteLock.class)
              .createWith(NamedLocks.ReadWriteCreator.class);
          configure(bean, name, kind);
          continue;
        }
        var bean = components.addBean(DistributedLock.class)
            .createWith(NamedLocks.Creator.class);
        configure(bean, name, kind);
        if (kind == NamedLocks.Kind.FAIR) {
          bean.qualifier(Fair.class);
        } else if (kind == NamedLocks.Kind.PLAIN && kinds.contains(NamedLocks.Kind.FAIR)) {
          bean.alternative(true).priority(NamedLocks.PLAIN_PRIORITY); // see NamedLocks
        }
      }
    });
  }

  private static void configure(SyntheticBeanBuilder<?> bean, String name, NamedLocks.Kind kind) {
    for (Class<?> type : kind.beanTypes()) {
      bean.type(type);
    }
    bean.qualifier(NamedLiteral.of(name))
        .scope(Dependent.class)
        .withParam(NamedLocks.NAME_PARAM, name)
        .withParam(NamedLocks.KIND_PARAM, kind.name());
  }

  private void collectNamedLock(InjectionPointInfo ip, Messages messages) {
    Type type = ip.type();
    String typeName = type.isClass() ? type.asClass().declaration().name() : "";
    if (!NamedLocks.isLockType(typeName)) {
      return;
    }
    AnnotationInfo named = ip.qualifiers().stream()
        .filter(q -> q.name().equals(Named.class.getName())).findFirst().orElse(null);
    boolean fair = ip.qualifiers().stream().anyMatch(q -> q.name().equals(Fair.class.getName()));
    DeclarationInfo declaration = ip.declaration();
    if (named == null) {
      if (fair) {
        messages.error("@Fair lock injection point " + describe(declaration) + " has no @Named: "
            + "write @Named(\"<lock name>\") @Fair", declaration);
      }
      return;
    }
    String field = declaration.kind() == DeclarationInfo.Kind.FIELD
        ? declaration.asField().name() : null;
    String value = named.hasValue() ? named.value().asString() : "";
    try {
      String where = describe(declaration);
      lockBeans.computeIfAbsent(NamedLocks.resolve(value, field, where),
          n -> EnumSet.noneOf(NamedLocks.Kind.class)).add(NamedLocks.kind(typeName, fair, where));
    } catch (IllegalArgumentException e) {
      messages.error(e.getMessage(), ip.declaration());
    }
  }

  /** The language-model twin of {@link LockedDefinitions#targets(Class)}. */
  private static List<LockedTarget> targets(ClassInfo beanClass) {
    List<LockedTarget> targets = new ArrayList<>();
    AnnotationInfo onClass = classAnnotation(beanClass);
    boolean classFinal = Modifier.isFinal(beanClass.modifiers());
    for (MethodInfo m : beanClass.methods()) {
      if (m.isConstructor() || m.declaringClass().name().equals(Object.class.getName())) {
        continue;
      }
      AnnotationInfo own = m.annotation(Locked.class);
      boolean business = !Modifier.isPrivate(m.modifiers()) && !m.isStatic();
      if (own == null && (onClass == null || !business)) {
        continue;
      }
      AnnotationInfo locked = own != null ? own : onClass;
      List<String> names = new ArrayList<>();
      List<String> types = new ArrayList<>();
      for (ParameterInfo p : m.parameters()) {
        names.add(p.name());
        types.add(p.type().toString());
      }
      targets.add(new LockedTarget(m.declaringClass().name(), m.name(), types, names,
          m.modifiers(), classFinal, own == null, member(locked, "value"),
          member(locked, "waitTime"), member(locked, "leaseTime"), flag(locked, "fenced"),
          mode(locked), flag(locked, "skipIfBusy"), member(locked, "holdAtLeast"),
          onLoss(locked),
          m.returnType().isVoid() ? "void" : m.returnType().toString(),
          returnTypes(m.returnType())));
    }
    return targets;
  }

  /**
   * The language-model twin of {@link LockedReturn#namesOf(Class)}: the class of {@code type},
   * then its supertypes, as far as the model knows them (a supertype the model cannot show is
   * left out; the run-time preparation checks again by reflection). Empty for {@code void},
   * primitives, arrays and type variables.
   */
  private static List<String> returnTypes(Type type) {
    ClassInfo declared = type.isClass() ? type.asClass().declaration()
        : type.isParameterizedType() ? type.asParameterizedType().declaration() : null;
    if (declared == null) {
      return List.of();
    }
    Set<String> names = new LinkedHashSet<>();
    Deque<ClassInfo> todo = new ArrayDeque<>(List.of(declared));
    while (!todo.isEmpty()) {
      ClassInfo c = todo.poll();
      if (!names.add(c.name())) {
        continue;
      }
      try {
        if (c.superClassDeclaration() != null) {
          todo.add(c.superClassDeclaration());
        }
        todo.addAll(c.superInterfacesDeclarations());
      } catch (RuntimeException e) {
        // not in the model: keep the names found so far
      }
    }
    return List.copyOf(names);
  }

  /**
   * Whether {@code @Locked} is on the class, a superclass or an interface, or on a method of
   * any of them: then the bean's operations are prepared at startup (by reflection, which
   * decides which methods exactly), without relying on a language model to list inherited
   * annotations or interface default methods.
   */
  private static boolean mentionsLocked(ClassInfo type) {
    if (type == null) {
      return false;
    }
    if (type.hasAnnotation(Locked.class)
        || type.methods().stream().anyMatch(m -> m.hasAnnotation(Locked.class))
        || mentionsLocked(type.superClassDeclaration())) {
      return true;
    }
    return type.superInterfacesDeclarations().stream()
        .anyMatch(HoldfastBuildCompatibleExtension::mentionsLocked);
  }

  /**
   * The class's {@code @Locked}, else its nearest superclass's ({@code @Locked} is
   * {@code @Inherited}; walked explicitly rather than relying on how a language model treats it).
   */
  private static AnnotationInfo classAnnotation(ClassInfo beanClass) {
    for (ClassInfo c = beanClass; c != null; c = c.superClassDeclaration()) {
      AnnotationInfo locked = c.annotation(Locked.class);
      if (locked != null) {
        return locked;
      }
    }
    return null;
  }

  private static String member(AnnotationInfo annotation, String name) {
    AnnotationMember member = annotation.member(name);
    return member == null ? "" : member.asString();
  }

  private static boolean flag(AnnotationInfo annotation, String name) {
    AnnotationMember member = annotation.member(name);
    return member != null && member.asBoolean();
  }

  private static Locked.Mode mode(AnnotationInfo annotation) {
    AnnotationMember member = annotation.member("mode");
    return member == null ? Locked.Mode.EXCLUSIVE : member.asEnum(Locked.Mode.class);
  }

  private static Locked.OnLoss onLoss(AnnotationInfo annotation) {
    AnnotationMember member = annotation.member("onLoss");
    return member == null ? Locked.OnLoss.NOTHING : member.asEnum(Locked.OnLoss.class);
  }

  private static String describe(DeclarationInfo declaration) {
    return switch (declaration.kind()) {
      case FIELD -> declaration.asField().declaringClass().name() + "."
          + declaration.asField().name();
      case PARAMETER -> "parameter " + declaration.asParameter().name() + " of "
          + declaration.asParameter().declaringMethod().declaringClass().name() + "."
          + declaration.asParameter().declaringMethod().name();
      default -> declaration.toString();
    };
  }
}
