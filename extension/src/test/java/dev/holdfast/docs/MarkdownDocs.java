package dev.holdfast.docs;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * The project's Markdown documents as the drift tests read them: README.md and docs/*.md, their
 * fenced code blocks, and the repository files they are checked against.
 */
final class MarkdownDocs {

  /** A fenced block: its language, its text, where it starts and the line just before it. */
  record Block(Path file, int line, String language, String text, String lineBefore) {
    /** {@return where the block is, for messages: {@code docs/locked.md:42}} */
    String where() {
      return root().relativize(file) + ":" + line;
    }
  }

  private MarkdownDocs() {
  }

  /** {@return the repository's root: the parent of the extension module the tests run in} */
  static Path root() {
    Path module = Path.of(System.getProperty("basedir", ".")).toAbsolutePath().normalize();
    Path root = module.getParent();
    assertTrue(Files.isRegularFile(root.resolve("README.md")) && Files.isDirectory(root.resolve("docs")),
        "README.md and docs/ not found in " + root);
    return root;
  }

  /** {@return README.md and every docs/*.md, README first} */
  static List<Path> documents() {
    List<Path> documents = new ArrayList<>();
    documents.add(root().resolve("README.md"));
    try (Stream<Path> pages = Files.list(root().resolve("docs"))) {
      pages.filter(p -> p.toString().endsWith(".md")).sorted().forEach(documents::add);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return documents;
  }

  static String read(Path file) {
    try {
      return Files.readString(file);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** {@return every fenced block of {@code file} (``` fences, any language, possibly empty)} */
  static List<Block> blocks(Path file) {
    List<String> lines = read(file).lines().toList();
    List<Block> blocks = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      String line = lines.get(i);
      if (!line.startsWith("```")) {
        continue;
      }
      String language = line.substring(3).trim();
      int start = i;
      StringBuilder text = new StringBuilder();
      for (i++; i < lines.size() && !lines.get(i).startsWith("```"); i++) {
        text.append(lines.get(i)).append('\n');
      }
      assertTrue(i < lines.size(), "unclosed code block at " + file + ":" + (start + 1));
      blocks.add(new Block(file, start + 1, language, text.toString(),
          start > 0 ? lines.get(start - 1).trim() : ""));
    }
    return blocks;
  }

  /** {@return the prose of {@code file}: its text with the fenced blocks blanked out} */
  static String prose(Path file) {
    StringBuilder prose = new StringBuilder();
    boolean inBlock = false;
    for (String line : read(file).lines().toList()) {
      if (line.startsWith("```")) {
        inBlock = !inBlock;
      } else if (!inBlock) {
        prose.append(line);
      }
      prose.append('\n');
    }
    return prose.toString();
  }
}
