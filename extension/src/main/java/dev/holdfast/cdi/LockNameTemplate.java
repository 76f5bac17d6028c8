package dev.holdfast.cdi;

import java.util.ArrayList;
import java.util.List;

/**
 * A parsed {@code @Locked} name: literal text and parameter references, so that a call only
 * concatenates. Syntax: {@code {name}} or {@code {index}} is a parameter,
 * <code>&#123;&#123;</code> and <code>}}</code> are literal braces.
 */
final class LockNameTemplate {
  /** A literal ({@code parameter < 0}) or a reference to parameter {@code parameter}. */
  private record Part(String literal, int parameter, String placeholder) {
  }

  private final String source;
  private final List<Part> parts;

  private LockNameTemplate(String source, List<Part> parts) {
    this.source = source;
    this.parts = parts;
  }

  /**
   * Parses {@code template} for a method with these parameter names.
   *
   * @throws IllegalArgumentException describing the faulty placeholder (without the "where")
   */
  static LockNameTemplate parse(String template, List<String> parameterNames) {
    List<Part> parts = new ArrayList<>();
    StringBuilder literal = new StringBuilder();
    int i = 0;
    while (i < template.length()) {
      char c = template.charAt(i);
      if (c == '{' && i + 1 < template.length() && template.charAt(i + 1) == '{') {
        literal.append('{');
        i += 2;
      } else if (c == '}' && i + 1 < template.length() && template.charAt(i + 1) == '}') {
        literal.append('}');
        i += 2;
      } else if (c == '}') {
        throw new IllegalArgumentException("unmatched '}' at position " + i
            + " (write '}}' for a literal brace)");
      } else if (c == '{') {
        int close = template.indexOf('}', i);
        if (close < 0) {
          throw new IllegalArgumentException("unclosed '{' at position " + i
              + " (write '{{' for a literal brace)");
        }
        String placeholder = template.substring(i + 1, close);
        if (literal.length() > 0) {
          parts.add(new Part(literal.toString(), -1, null));
          literal.setLength(0);
        }
        parts.add(new Part(null, parameterIndex(placeholder, parameterNames), placeholder));
        i = close + 1;
      } else {
        literal.append(c);
        i++;
      }
    }
    if (literal.length() > 0) {
      parts.add(new Part(literal.toString(), -1, null));
    }
    return new LockNameTemplate(template, List.copyOf(parts));
  }

  private static int parameterIndex(String placeholder, List<String> names) {
    if (placeholder.isEmpty()) {
      throw new IllegalArgumentException("empty placeholder {} (write '{{}}' for literal braces)");
    }
    if (placeholder.chars().allMatch(Character::isDigit)) {
      int index = Integer.parseInt(placeholder);
      if (index >= names.size()) {
        throw new IllegalArgumentException("placeholder {" + placeholder + "} but the method has "
            + names.size() + " parameter(s)");
      }
      return index;
    }
    int index = names.indexOf(placeholder);
    if (index < 0) {
      boolean noNames = !names.isEmpty() && names.stream().allMatch(n -> n.matches("arg\\d+"));
      throw new IllegalArgumentException("placeholder {" + placeholder
          + "} names no parameter; the parameters are " + names
          + (noNames ? " (compile with -parameters to use names, or write {0}, {1}...)" : ""));
    }
    return index;
  }

  /**
   * The lock name for these arguments.
   *
   * @throws IllegalArgumentException if a referenced argument is {@code null}
   */
  String render(Object[] args) {
    if (parts.size() == 1 && parts.get(0).parameter < 0) {
      return parts.get(0).literal;
    }
    StringBuilder name = new StringBuilder(source.length() + 16);
    for (Part p : parts) {
      if (p.parameter < 0) {
        name.append(p.literal);
      } else {
        Object arg = args[p.parameter];
        if (arg == null) {
          throw new IllegalArgumentException("@Locked(\"" + source + "\"): the argument for {"
              + p.placeholder + "} is null, so there is no lock name");
        }
        name.append(arg);
      }
    }
    return name.toString();
  }

  @Override
  public String toString() {
    return source;
  }
}
