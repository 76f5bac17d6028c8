package dev.holdfast.docs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every {@code ```java} block of README.md and docs/*.md compiles against the extension's test
 * class path, so a renamed method breaks the build instead of the reader. The conventions (how a
 * block is wrapped, the {@code <!-- snippet: … -->} marker, {@code given:} names) are described
 * in CONTRIBUTING.md, "Documents".
 */
class DocsSnippetsTest {

  /** The imports every snippet gets; JUnit's {@code Named} would clash with jakarta.inject's. */
  private static final String IMPORTS = """
      import dev.holdfast.*;
      import dev.holdfast.testing.*;
      import jakarta.inject.*;
      import jakarta.enterprise.context.*;
      import jakarta.enterprise.event.*;
      import java.time.*;
      import java.util.*;
      import java.util.concurrent.*;
      import java.util.function.*;
      import java.util.stream.*;
      import org.junit.jupiter.api.AfterEach;
      import org.junit.jupiter.api.BeforeEach;
      import org.junit.jupiter.api.Test;
      import org.junit.jupiter.api.extension.RegisterExtension;
      import static org.junit.jupiter.api.Assertions.*;
      """;

  private static final Pattern MARKER =
      Pattern.compile("<!--\\s*snippet:\\s*(unit|members|statements|skip)\\b(.*?)-->");
  private static final Pattern GIVEN = Pattern.compile(";\\s*given:\\s*([\\w\\s,]+)");
  /** A top-level type declaration at column 0 makes a block a compilation unit. */
  private static final Pattern TOP_LEVEL_TYPE = Pattern.compile(
      "(?m)^(?:public |abstract |final |sealed )*(?:class|interface|record|enum|@interface) (\\w+)");
  private static final Pattern PUBLIC_TYPE = Pattern.compile(
      "(?m)^public (?:abstract |final |sealed )*(?:class|interface|record|enum|@interface) (\\w+)");
  /** The name in javac's "cannot find symbol" details: {@code symbol:   method runReport()}. */
  private static final Pattern MISSING_SYMBOL = Pattern.compile("symbol:\\s+\\w+\\s+(\\w+)");
  private static final Set<String> CANNOT_FIND = Set.of("compiler.err.cant.resolve",
      "compiler.err.cant.resolve.location", "compiler.err.cant.resolve.args",
      "compiler.err.cant.resolve.location.args", "compiler.err.invalid.mref");

  enum Form { UNIT, MEMBERS, STATEMENTS }

  /** One block as javac sees it. */
  record Snippet(MarkdownDocs.Block block, Form form, Set<String> given, int index) {
    String packageName() {
      return "docsnippet.s" + index;
    }

    /** {@return the Java source: the block, wrapped as its form says, in a package of its own} */
    String source() {
      return prefix() + block.text() + switch (form) {
        case UNIT -> "";
        case MEMBERS -> "}\n";
        case STATEMENTS -> "  }\n}\n";
      };
    }

    private String prefix() {
      String head = "package " + packageName() + ";\n" + IMPORTS;
      return switch (form) {
        case UNIT -> head;
        case MEMBERS -> head + "abstract class Snippet {\n";
        case STATEMENTS -> head + "abstract class Snippet {\n  LockClient locks;\n\n"
            + "  void snippet() throws Exception {\n";
      };
    }

    /** {@return the document's line that line {@code sourceLine} of {@link #source()} shows} */
    int documentLine(long sourceLine) {
      return (int) (block.line() + sourceLine - prefix().lines().count());
    }

    String fileName() {
      Matcher m = PUBLIC_TYPE.matcher(block.text());
      return form == Form.UNIT && m.find() ? m.group(1) : "Snippet";
    }
  }

  @Test
  void everyJavaBlockInTheReadmeAndDocs_compiles(@TempDir Path classes) throws IOException {
    List<Snippet> snippets = snippets();
    assertTrue(snippets.size() >= 20, "only " + snippets.size() + " Java blocks found");
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    assertNotNull(javac, "no system Java compiler (the tests need a JDK)");

    Map<URI, Snippet> bySource = new HashMap<>();
    List<JavaFileObject> sources = new ArrayList<>();
    for (Snippet snippet : snippets) {
      JavaFileObject source = new SimpleJavaFileObject(URI.create("string:///"
          + snippet.packageName().replace('.', '/') + "/" + snippet.fileName() + ".java"),
          JavaFileObject.Kind.SOURCE) {
        @Override
        public CharSequence getCharContent(boolean ignoreEncodingErrors) {
          return snippet.source();
        }
      };
      sources.add(source);
      bySource.put(source.toUri(), snippet);
    }
    DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
    List<String> options = List.of("-proc:none", "-parameters", "-Xlint:none", "-nowarn",
        "-d", classes.toString(), "-classpath", testClassPath());
    javac.getTask(null, null, diagnostics, options, null, sources).call();

    List<String> problems = new ArrayList<>();
    for (Diagnostic<? extends JavaFileObject> d : diagnostics.getDiagnostics()) {
      if (d.getKind() != Diagnostic.Kind.ERROR) {
        continue;
      }
      Snippet snippet = d.getSource() == null ? null : bySource.get(d.getSource().toUri());
      String message = d.getMessage(Locale.ROOT);
      if (snippet != null && CANNOT_FIND.contains(d.getCode())) {
        Matcher missing = MISSING_SYMBOL.matcher(message);
        if (missing.find() && snippet.given().contains(missing.group(1))) {
          continue; // a name the reader's application supplies, listed with "given:"
        }
      }
      String where = snippet == null ? "?" : MarkdownDocs.root().relativize(snippet.block().file())
          + ":" + snippet.documentLine(d.getLineNumber());
      problems.add(where + ": " + message.replace("\n", "\n    "));
    }
    if (!problems.isEmpty()) {
      fail(problems.size() + " problem(s) in Java blocks of the README and docs/ (see CONTRIBUTING.md,"
          + " \"Documents\", for the snippet conventions):\n" + String.join("\n", problems));
    }
  }

  @Test
  void aRenamedMethodInASnippet_failsTheCompilation(@TempDir Path classes) {
    // The check itself: a snippet calling a method the API does not have must not compile, even
    // with every other name given.
    MarkdownDocs.Block block = new MarkdownDocs.Block(MarkdownDocs.root().resolve("README.md"), 1,
        "java", "FencedLock lock = locks.getFencedLock(\"a\");\nlong t = lock.lockAndGetTokn();\n", "");
    Snippet snippet = new Snippet(block, Form.STATEMENTS, Set.of(), 0);
    DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
    JavaFileObject source = new SimpleJavaFileObject(URI.create("string:///docsnippet/s0/Snippet.java"),
        JavaFileObject.Kind.SOURCE) {
      @Override
      public CharSequence getCharContent(boolean ignoreEncodingErrors) {
        return snippet.source();
      }
    };
    boolean compiled = ToolProvider.getSystemJavaCompiler().getTask(null, null, diagnostics,
        List.of("-proc:none", "-d", classes.toString(), "-classpath", testClassPath()), null,
        List.of(source)).call();
    assertEquals(false, compiled);
    assertEquals(List.of(3), diagnostics.getDiagnostics().stream()
        .map(d -> snippet.documentLine(d.getLineNumber())).toList());
    assertTrue(diagnostics.getDiagnostics().get(0).getMessage(Locale.ROOT).contains("lockAndGetTokn"));
  }

  /** {@return the Java blocks of the documents, each with its form and given names} */
  static List<Snippet> snippets() {
    List<Snippet> snippets = new ArrayList<>();
    for (Path document : MarkdownDocs.documents()) {
      for (MarkdownDocs.Block block : MarkdownDocs.blocks(document)) {
        if (!block.language().equals("java")) {
          continue;
        }
        Matcher marker = MARKER.matcher(block.lineBefore());
        Form form = TOP_LEVEL_TYPE.matcher(block.text()).find() ? Form.UNIT : Form.STATEMENTS;
        Set<String> given = Set.of();
        if (marker.find()) {
          if (marker.group(1).equals("skip")) {
            assertTrue(marker.group(2).replaceAll("[\\s—-]", "").length() > 3,
                block.where() + ": a skipped snippet must say why (<!-- snippet: skip — reason -->)");
            continue;
          }
          form = Form.valueOf(marker.group(1).toUpperCase(Locale.ROOT));
          Matcher names = GIVEN.matcher(marker.group(2));
          if (names.find()) {
            given = Arrays.stream(names.group(1).split(",")).map(String::trim)
                .filter(s -> !s.isEmpty()).collect(Collectors.toCollection(TreeSet::new));
          }
        } else {
          assertTrue(!block.lineBefore().contains("snippet"),
              block.where() + ": unreadable snippet marker: " + block.lineBefore());
        }
        snippets.add(new Snippet(block, form, given, snippets.size() + 1));
      }
    }
    return snippets;
  }

  /** Surefire's own class path is a manifest-only jar; it names the real one in a property. */
  private static String testClassPath() {
    String path = System.getProperty("surefire.test.class.path");
    return path != null && !path.isBlank() ? path : System.getProperty("java.class.path");
  }
}
