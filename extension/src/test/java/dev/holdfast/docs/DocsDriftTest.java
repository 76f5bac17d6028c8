package dev.holdfast.docs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.Locked;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * Statements of the README and docs/ that the code or CI could contradict, checked where a check
 * is cheap: the configuration reference against the keys Holdfast reads, the README's feature
 * table against the API, the README's commands against {@code .ci/run}, the versions in
 * dependency snippets against the build, and every relative link against the files it names.
 */
class DocsDriftTest {

  private static final Pattern TABLE_KEY_ROW =
      Pattern.compile("(?m)^\\| `(holdfast\\.[^`]+)` \\| ([^|]*) \\|");
  private static final Pattern BACKTICKED_KEY = Pattern.compile("`(holdfast\\.[^`\\s]*)`");
  private static final Pattern CLASS_OVERRIDE =
      Pattern.compile("holdfast\\.\"[^\"]+\"\\.locked\\.([a-z-]+)");
  private static final Pattern PROPERTIES_KEY = Pattern.compile("(?m)^\\s*(holdfast\\.[^=\\s]+)\\s*=");

  // ---- (a) the configuration reference ----

  @Test
  void configurationReference_hasEveryKeyHoldfastReads_withADefault() {
    Map<String, String> documented = configurationRows();
    List<String> missing = new ArrayList<>();
    for (String key : knownKeys()) {
      String byDefault = documented.get(key);
      if (byDefault == null || byDefault.isBlank()) {
        missing.add(key);
      }
    }
    assertEquals(List.of(), missing, "keys Holdfast reads that docs/configuration.md lacks, or "
        + "lists without a default (a table row: | `key` | default | meaning |)");
  }

  @Test
  void configurationReference_namesOnlyKeysThatExist() {
    Set<String> named = new LinkedHashSet<>();
    Matcher m = BACKTICKED_KEY.matcher(MarkdownDocs.read(docs("configuration.md")));
    while (m.find()) {
      named.add(m.group(1));
    }
    assertTrue(named.size() >= knownKeys().size(), "too few keys read from the page: " + named);
    assertEquals(List.of(), unknown(named), "docs/configuration.md names keys Holdfast does not read");
  }

  @Test
  void everyPropertiesSnippet_usesOnlyKeysThatExist() {
    Set<String> named = new LinkedHashSet<>();
    for (Path document : MarkdownDocs.documents()) {
      for (MarkdownDocs.Block block : MarkdownDocs.blocks(document)) {
        if (block.language().equals("properties")) {
          Matcher m = PROPERTIES_KEY.matcher(block.text());
          while (m.find()) {
            named.add(m.group(1));
          }
        }
      }
    }
    assertTrue(named.contains(LockClientConfig.ADDRESS), "no properties snippet read: " + named);
    assertEquals(List.of(), unknown(named), "properties snippets in the README or docs/ set keys "
        + "Holdfast does not read");
  }

  /** {@return the keys of {@code named} that are not Holdfast's; patterns with placeholders pass} */
  private static List<String> unknown(Set<String> named) {
    Set<String> known = new LinkedHashSet<>(knownKeys());
    List<String> unknown = new ArrayList<>();
    for (String key : named) {
      if (key.contains("<") || key.contains("*") || key.endsWith(".") || key.contains("…")) {
        continue; // a pattern or a namespace, not a key
      }
      Matcher override = CLASS_OVERRIDE.matcher(key);
      boolean exists = override.matches()
          ? known.contains("holdfast.locked." + override.group(1)) : known.contains(key);
      if (!exists) {
        unknown.add(key);
      }
    }
    return unknown;
  }

  /**
   * {@return every key Holdfast reads: the client's ({@link LockClientConfig#KEYS}), the
   * container's switches and the {@code @Locked} overrides} The last two are package-private
   * lists in the code that decides on them, read here so that this test has no list of its own.
   */
  static List<String> knownKeys() {
    List<String> keys = new ArrayList<>(LockClientConfig.KEYS);
    keys.addAll(packagePrivateList("dev.holdfast.ConfigKeys", "CONTAINER_KEYS"));
    for (String member : packagePrivateList("dev.holdfast.cdi.LockedDefinitions", "CONFIGURABLE")) {
      keys.add("holdfast.locked." + member);
    }
    return keys;
  }

  private static Map<String, String> configurationRows() {
    Map<String, String> rows = new LinkedHashMap<>();
    Matcher m = TABLE_KEY_ROW.matcher(MarkdownDocs.read(docs("configuration.md")));
    while (m.find()) {
      rows.put(m.group(1), m.group(2).trim());
    }
    return rows;
  }

  @SuppressWarnings("unchecked")
  private static List<String> packagePrivateList(String className, String fieldName) {
    try {
      Field field = Class.forName(className).getDeclaredField(fieldName);
      field.setAccessible(true);
      return List.copyOf((List<String>) field.get(null));
    } catch (ReflectiveOperationException e) {
      throw new AssertionError("the key list " + className + "." + fieldName + " moved: "
          + "point this test at its new place", e);
    }
  }

  // ---- (c) statements the code could contradict ----

  @Test
  void featureTable_namesOnlyApiThatExists() {
    List<String> rows = readmeFeatureTableHoldfastCells();
    assertTrue(rows.size() >= 10, "the README's feature table was not found: " + rows);
    Set<String> clientMethods = Arrays.stream(LockClient.class.getMethods())
        .filter(m -> Modifier.isPublic(m.getModifiers())).map(Method::getName)
        .collect(Collectors.toSet());
    Set<String> lockedMembers = Arrays.stream(Locked.class.getDeclaredMethods())
        .map(Method::getName).collect(Collectors.toSet());
    List<String> contradicted = new ArrayList<>();
    int checked = 0;
    for (String cell : rows) {
      Matcher getter = Pattern.compile("`(get\\w+)`").matcher(cell);
      while (getter.find()) {
        checked++;
        if (!clientMethods.contains(getter.group(1))) {
          contradicted.add("LockClient." + getter.group(1) + " (" + cell + ")");
        }
      }
      Matcher member = Pattern.compile("(\\w+) = ").matcher(cell.contains("@Locked(") ? cell : "");
      while (member.find()) {
        checked++;
        if (!lockedMembers.contains(member.group(1))) {
          contradicted.add("@Locked." + member.group(1) + " (" + cell + ")");
        }
      }
      Matcher type = Pattern.compile("`@?([A-Z][a-z]\\w+)`").matcher(cell);
      while (type.find()) {
        checked++;
        try {
          Class.forName("dev.holdfast." + type.group(1));
        } catch (ClassNotFoundException e) {
          contradicted.add("dev.holdfast." + type.group(1) + " (" + cell + ")");
        }
      }
    }
    assertTrue(checked >= 12, "too few API names in the feature table: " + checked);
    assertEquals(List.of(), contradicted, "the README's feature table names API that does not exist");
  }

  /** {@return the Holdfast column of the README's feature table (header {@code | | Holdfast |})} */
  private static List<String> readmeFeatureTableHoldfastCells() {
    List<String> cells = new ArrayList<>();
    boolean inTable = false;
    for (String line : MarkdownDocs.read(readme()).lines().toList()) {
      if (line.startsWith("| | Holdfast |")) {
        inTable = true;
      } else if (inTable && line.startsWith("|")) {
        if (!line.startsWith("|---")) {
          cells.add(line.split("\\|")[2].trim());
        }
      } else if (inTable) {
        break;
      }
    }
    return cells;
  }

  @Test
  void everyMavenCommandInTheReadme_isOneCiRuns() throws Exception {
    Set<String> ciLines = Files.readAllLines(MarkdownDocs.root().resolve(".ci/run")).stream()
        .map(String::trim).collect(Collectors.toSet());
    List<String> commands = new ArrayList<>();
    for (MarkdownDocs.Block block : MarkdownDocs.blocks(readme())) {
      if (block.language().equals("sh") || block.language().equals("bash")) {
        block.text().lines().map(String::trim).filter(l -> l.startsWith("./mvnw"))
            .forEach(commands::add);
      }
    }
    Matcher inline = Pattern.compile("`(\\./mvnw [^`]+)`").matcher(MarkdownDocs.prose(readme()));
    while (inline.find()) {
      commands.add(inline.group(1));
    }
    assertTrue(commands.contains("./mvnw -B verify"), "the README's test command is gone: " + commands);
    List<String> notRun = commands.stream()
        .filter(c -> !c.endsWith("# not run by CI") && !ciLines.contains(c)).toList();
    assertEquals(List.of(), notRun, "./mvnw commands in the README that .ci/run does not run "
        + "(run them there, or end the line with '# not run by CI')");
  }

  @Test
  void holdfastVersionsInTheDocs_areTheBuildsVersion() {
    String pom = MarkdownDocs.read(MarkdownDocs.root().resolve("pom.xml"));
    Matcher own = Pattern.compile("<artifactId>holdfast-parent</artifactId>\\s*<version>([^<]+)</version>")
        .matcher(pom);
    assertTrue(own.find(), "no version in pom.xml");
    String version = own.group(1);
    Pattern dependency = Pattern.compile("<groupId>dev\\.holdfast</groupId>\\s*<artifactId>([^<]+)"
        + "</artifactId>\\s*<version>([^<]+)</version>");
    List<String> found = new ArrayList<>();
    List<String> wrong = new ArrayList<>();
    for (Path document : MarkdownDocs.documents()) {
      Matcher m = dependency.matcher(MarkdownDocs.read(document));
      while (m.find()) {
        found.add(m.group(1));
        if (!m.group(2).equals(version)) {
          wrong.add(MarkdownDocs.root().relativize(document) + ": " + m.group(1) + " " + m.group(2));
        }
      }
    }
    assertTrue(found.contains("holdfast"), "no holdfast dependency snippet found");
    assertEquals(List.of(), wrong, "dependency snippets not at the build's version " + version);
  }

  @Test
  void everyRelativeLink_pointsToAFileAndHeadingThatExist() {
    Pattern link = Pattern.compile("\\]\\(([^)\\s]+)\\)");
    List<Path> documents = new ArrayList<>(MarkdownDocs.documents());
    documents.add(MarkdownDocs.root().resolve("CONTRIBUTING.md"));
    documents.add(MarkdownDocs.root().resolve("CHANGELOG.md"));
    List<String> broken = new ArrayList<>();
    int checked = 0;
    for (Path document : documents) {
      Matcher m = link.matcher(MarkdownDocs.prose(document));
      while (m.find()) {
        String target = m.group(1);
        if (target.matches("^[a-z]+:.*")) {
          continue; // https:, mailto:
        }
        checked++;
        int hash = target.indexOf('#');
        Path file = hash == 0 ? document
            : document.getParent().resolve(hash < 0 ? target : target.substring(0, hash)).normalize();
        String where = MarkdownDocs.root().relativize(document) + ": " + target;
        if (!Files.exists(file)) {
          broken.add(where + " (no such file)");
        } else if (hash >= 0 && !headingSlugs(file).contains(target.substring(hash + 1))) {
          broken.add(where + " (no such heading; headings: " + headingSlugs(file) + ")");
        }
      }
    }
    assertTrue(checked >= 30, "too few links read: " + checked);
    assertEquals(List.of(), broken, "broken links in the README, docs/, CONTRIBUTING or CHANGELOG");
  }

  /** {@return the anchors a Git host makes of the headings of {@code file}} */
  private static Set<String> headingSlugs(Path file) {
    Set<String> slugs = new LinkedHashSet<>();
    for (String line : MarkdownDocs.prose(file).lines().toList()) {
      if (line.startsWith("#")) {
        slugs.add(line.replaceFirst("^#+\\s*", "").toLowerCase(Locale.ROOT)
            .replaceAll("[^\\p{L}\\p{N} _-]", "").replace(' ', '-'));
      }
    }
    return slugs;
  }

  private static Path readme() {
    return MarkdownDocs.root().resolve("README.md");
  }

  private static Path docs(String page) {
    Path file = MarkdownDocs.root().resolve("docs").resolve(page);
    assertTrue(Files.isRegularFile(file), "missing " + file);
    return file;
  }
}
