"""Writes the reST of two pages of the API reference from their one source each: the C ABI from
include/lucid.h (every function with the comment above it, grouped by the header's
`/* ---- section ---- */` lines) and the Swift API from the `///` doc comments of
Sources/LucidEngine/API/*.swift (every `public` declaration, by type and `// MARK:` group).

docs/conf.py runs it at every Sphinx build, so the pages always say what the sources say;
tests/test_api_docs.py checks that nothing declared is left off. By hand:

    python tools/gen_api_docs.py [OUTPUT_DIR]      # writes c-abi.rst and swift.rst (build/docs/generated)

It needs nothing beyond the standard library.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "lucid.h"
SWIFT_API = ROOT / "Sources" / "LucidEngine" / "API"
DEFAULT_OUTPUT = ROOT / "build" / "docs" / "generated"


# ---- reST text ---------------------------------------------------------------------------------


def inline(text: str) -> str:
    """Prose from a source comment as reST inline text: `code` spans become literals, and every
    other character that reST reads as markup (emphasis, references, substitutions, escapes)
    stands for itself."""
    parts = re.split(r"`([^`\n]+)`", text)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(re.sub(r"([\\*`|_\[\]<>])", r"\\\1", part))
            continue
        literal = "``" + part + "``"
        # reST wants a literal to start and end at a word's edge: "``MTLBuffer``s" is written
        # "``MTLBuffer``\\ s", which reads as the same word.
        if re.search(r"\w$", parts[i - 1]):
            literal = "\\ " + literal
        if re.match(r"\w", parts[i + 1]):
            literal += "\\ "
        out.append(literal)
    text = "".join(out)
    # A line that reST would take for a list item, a section or a directive stays a paragraph.
    return re.sub(r"^(\s*)([-+#.:=~]|\d+[.)])", r"\1\\\2", text)


def paragraphs(lines: list[str]) -> list[str]:
    """Comment lines as reST paragraphs: one per blank-line-separated block, with "- " items
    (their continuation lines indented under them) as a bullet list."""
    blocks, current = [], []
    for line in lines + [""]:
        if not line.strip():
            if current:
                blocks.append(current)
            current = []
        else:
            current.append(line.rstrip())
    out = []
    for block in blocks:
        items, text = [], []
        for line in block:
            stripped = line.strip()
            if stripped.startswith("- "):
                if text and not items:
                    out.extend([inline(" ".join(text)), ""])
                    text = []
                items.append([stripped[2:]])
            elif items:
                items[-1].append(stripped)
            else:
                text.append(stripped)
        if text:
            out.extend([inline(" ".join(text)), ""])
        for item in items:
            out.append("- " + inline(" ".join(item)))
        if items:
            out.append("")
    return out


def heading(title: str, underline: str) -> list[str]:
    return [title, underline * len(title), ""]


def indent(lines: list[str], by: str = "   ") -> list[str]:
    return [by + line if line else "" for line in lines]


# ---- the C header ------------------------------------------------------------------------------

_SECTION = re.compile(r"^/\*\s*-{3,}\s*(.*?)\s*-{3,}\s*\*/\s*$")


class CItem:
    """A declaration of the header with the comment written right above it (empty for none)."""

    def __init__(self, decl: str, comment: list[str]):
        self.decl, self.kind, self.comment = decl, _declaration_kind(decl), comment


def _comment_lines(text: str) -> list[str]:
    """The text of a /* ... */ comment, one entry per line, the leading ` * ` of each removed."""
    body = text.strip()[2:-2]
    lines = [re.sub(r"^\s*\*( |$)", "", line) for line in body.splitlines()]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return [line.strip() if i == 0 else line for i, line in enumerate(lines)]


def _declaration_kind(decl: str) -> str:
    if decl.startswith("typedef"):
        return "type"
    if decl.startswith("enum"):
        return "enum"
    return "function"


def parse_header(text: str):
    """The header as (preamble lines, [(section title, intro lines, [CItem])]). Declarations
    before the first section line make a first section of their own ("Types, codes and
    errors"). A comment directly above a declaration (no blank line between) is that
    declaration's; one right under a declaration that starts with one of its names is a note
    on it; a comment followed by a blank line introduces its section."""
    lines = text.splitlines()
    preamble: list[str] = []
    sections = [["Types, codes and errors", [], []]]
    pending: list[str] | None = None  # a comment waiting for what follows it
    item: CItem | None = None  # the declaration on the line right above, if any
    seen_code = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            if pending is not None:
                sections[-1][1].extend(pending + [""])
                pending = None
            item = None
            i += 1
            continue
        if stripped.startswith("#") or stripped in ('extern "C" {', "}"):
            seen_code = True
            item = None
            i += 1
            continue
        section = _SECTION.match(stripped)
        if section:
            sections.append([section.group(1), [], []])
            pending, item = None, None
            i += 1
            continue
        if stripped.startswith("/*"):
            j = i
            while "*/" not in lines[j]:
                j += 1
            comment = _comment_lines("\n".join(lines[i : j + 1]))
            first = comment[0].split()[0] if comment and comment[0].split() else ""
            if not seen_code:
                preamble = comment
            elif item is not None and pending is None and first in _declared_names(item.decl):
                # Right under a declaration and starting with one of its names: a note on it.
                item.comment = item.comment + ([""] if item.comment else []) + comment
            else:
                pending = (pending or []) + comment
                item = None
            i = j + 1
            continue
        seen_code = True
        # A declaration: everything up to its ';' (enums end at "};").
        j = i
        decl = stripped
        while not _complete(decl):
            j += 1
            decl += "\n" + lines[j].strip()
        item = CItem(decl, pending or [])
        sections[-1][2].append(item)
        pending = None
        i = j + 1
    return preamble, [s for s in sections if s[2] or s[1]]


def _declared_names(decl: str) -> set[str]:
    """The names a declaration declares: a function's or typedef's, an enum's and its
    enumerators' (not parameters)."""
    code = re.sub(r"/\*.*?\*/", " ", decl, flags=re.S)
    if code.startswith("enum"):
        return set(re.findall(r"^enum\s+(\w+)", code)) | set(re.findall(r"(\w+)\s*=", code))
    for pattern in (r"\(\s*\*\s*(\w+)\s*\)\s*\(", r"(\w+)\s*\(", r"(\w+)\s*;"):
        m = re.search(pattern, code)  # a function pointer's name, a function's, a typedef's
        if m:
            return {m.group(1)}
    return set()


def _complete(decl: str) -> bool:
    code = re.sub(r"/\*.*?\*/", "", decl, flags=re.S)
    if code.lstrip().startswith("enum") and "{" in code:
        return code.rstrip().endswith("};")
    return code.rstrip().endswith(";")


def _flat(code: str) -> str:
    return " ".join(code.split())


def _enum_rst(decl: str, comment: list[str]) -> list[str]:
    m = re.match(r"enum\s+(\w+)\s*\{(.*)\}\s*;", decl, flags=re.S)
    name, body = m.group(1), m.group(2)
    out = [f".. c:enum:: {name}", ""] + indent(paragraphs(comment))
    # Enumerators, each with the comment that follows it on its line, if any.
    for entry in re.finditer(r"(\w+)\s*=\s*(-?\w+)\s*,?\s*(/\*(.*?)\*/)?", body, flags=re.S):
        out.extend(indent([f".. c:enumerator:: {entry.group(1)} = {entry.group(2)}", ""]))
        if entry.group(4):
            out.extend(indent(indent([inline(_flat(entry.group(4))), ""])))
    return out


def c_abi_rst(text: str) -> str:
    """The C ABI page's body (its title is docs/c-abi.rst's)."""
    preamble, sections = parse_header(text)
    out: list[str] = []
    # The header's opening comment: its first line, then its sections (a short line of its
    # own, e.g. "Conventions", followed by indented text) as headings with their text.
    block: list[str] = []
    for line in preamble:
        if line.strip() and not line.startswith(" ") and len(line.split()) <= 3 and block[-1:] == [""]:
            out.extend(paragraphs(block))
            out.extend(heading(line.strip(), "-"))
            block = []
        else:
            block.append(line)
    out.extend(paragraphs(block))
    for title, intro, items in sections:
        out.extend(heading(title[:1].upper() + title[1:], "-"))
        out.extend(paragraphs(intro))
        for item in items:
            decl = item.decl
            if item.kind == "function":
                out.extend([".. c:function:: " + _flat(decl).rstrip(";"), ""])
                out.extend(indent(paragraphs(item.comment)))
            elif item.kind == "enum":
                out.extend(_enum_rst(decl, item.comment))
            else:
                out.extend([".. c:type:: " + _flat(decl)[len("typedef ") :].rstrip(";"), ""])
                out.extend(indent(paragraphs(item.comment)))
    return "\n".join(out).rstrip() + "\n"


# ---- the Swift API -----------------------------------------------------------------------------

_CODE_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
_TYPE_DECL = re.compile(r"\b(?:enum|struct|class|protocol|actor|extension)\s+([\w.]+)")


class SwiftDecl:
    """A public declaration: its signature (without a body), its doc comment's lines, the
    dotted name of the type it is in ("" at file level) and the MARK group it is under. A
    type's `name` is its dotted name."""

    def __init__(self, signature: str, doc: list[str], container: str, mark: str | None):
        self.signature, self.doc, self.container, self.mark = signature, doc, container, mark
        type_decl = _TYPE_DECL.search(signature)
        self.is_type = bool(type_decl) and re.search(r"\b(?:func|var|let|init)\b", signature.split("{")[0]) is None
        self.name = (container + "." if container else "") + type_decl.group(1) if self.is_type else None


def _code(line: str) -> str:
    """A line of Swift without its comment and string literals (for counting brackets)."""
    line = _CODE_STRING.sub('""', line)
    return line.split("//", 1)[0]


def _joined(text: str) -> str:
    """A declaration written over several lines, on one (no space inside its brackets)."""
    return re.sub(r"([(\[]) | ([)\]])", lambda m: m.group(1) or m.group(2), _flat(text))


def _signature(lines: list[str], start: int) -> tuple[str, int]:
    """The declaration starting at lines[start], up to (not including) the `{` that opens its
    body, or to the end of its line when it has none; and the index of its last line."""
    text, depth, i = "", 0, start
    while True:
        code = _code(lines[i])
        for k, ch in enumerate(code):
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif ch == "{" and depth == 0:
                return _joined(text + " " + code[:k]), i
        text += " " + code
        if depth == 0:
            return _joined(text), i
        i += 1


def parse_swift(text: str) -> list[SwiftDecl]:
    """Every `public` declaration of a Swift file with its `///` comment, the type (or extension)
    it is in, and the `// MARK:` group above it."""
    lines = text.splitlines()
    decls: list[SwiftDecl] = []
    stack: list[tuple[str, int]] = []  # (type name, brace depth inside it)
    depth, doc, mark = 0, [], None
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith("///"):
            doc.append(stripped[3:][1:] if stripped[3:4] == " " else stripped[3:])
            i += 1
            continue
        m = re.match(r"//\s*MARK:\s*-?\s*(.*)", stripped)
        if m:
            mark = m.group(1).strip() or None
            i += 1
            continue
        code = _code(lines[i])
        if re.match(r"(?:@\w+(?:\([^)]*\))?\s+)*(?:\w+\s+)*public\b", stripped):
            signature, last = _signature(lines, i)
            container = ".".join(name for name, _ in stack)
            decls.append(SwiftDecl(signature, doc, container, mark if stack else None))
        else:
            last = i
        # A type or extension whose body opens here: what follows is inside it, under no MARK yet.
        head = code.split("{")[0]
        type_decl = _TYPE_DECL.search(head)
        if "{" in code and type_decl and not re.search(r"\b(?:func|var|let|init)\b", head):
            stack.append((type_decl.group(1), depth + 1))
            if not head.strip().startswith("extension"):
                mark = None  # (an extension's members stay under the MARK written above it)
        for k in range(i, last + 1):
            code = _code(lines[k])
            depth += code.count("{") - code.count("}")
        while stack and depth < stack[-1][1]:
            stack.pop()
            mark = None
        doc = []
        i = last + 1
    return decls


def _doc_rst(doc: list[str]) -> list[str]:
    """A `///` comment (Markdown) as reST: prose paragraphs, and ``` fences as code blocks."""
    out, prose, fence = [], [], None
    for line in doc:
        if line.strip().startswith("```"):
            if fence is None:
                out.extend(paragraphs(prose))
                prose, fence = [], []
                language = line.strip()[3:].strip() or "text"
                out.extend([f".. code-block:: {language}", ""])
            else:
                out.extend(indent(fence) + [""])
                fence = None
        elif fence is not None:
            fence.append(line)
        else:
            prose.append(line)
    if fence is not None:  # a fence left open runs to the comment's end, as in Markdown
        out.extend(indent(fence) + [""])
    out.extend(paragraphs(prose))
    return out


def swift_rst(files: list[Path]) -> str:
    """The Swift API page's body (its title is docs/swift.rst's): a section per file, in it a
    section per public type (nested types as `Outer.Inner`; an extension's members with the
    type's) and one for the functions outside any type, each declaration with its doc comment."""
    out: list[str] = []
    for path in files:
        decls = parse_swift(path.read_text())
        if not decls:
            continue
        out.extend(heading(path.name, "-"))
        groups: dict[str, list[SwiftDecl]] = {}
        for d in decls:
            groups.setdefault(d.name if d.is_type else d.container, []).append(d)
        for key, members in groups.items():
            out.extend(heading(key or "Functions", "~"))
            mark = None
            for d in members:
                if d.is_type:
                    out.extend([".. code-block:: swift", "", "   " + d.signature, ""])
                    out.extend(_doc_rst(d.doc))
                    continue
                if d.mark and d.mark != mark:
                    out.extend([".. rubric:: " + inline(d.mark), ""])
                mark = d.mark
                out.extend([".. describe:: " + d.signature, ""])
                out.extend(indent(_doc_rst(d.doc)))
    return "\n".join(out).rstrip() + "\n"


def write_pages(output: Path = DEFAULT_OUTPUT) -> list[Path]:
    """Writes c-abi.rst and swift.rst into `output`; a file whose text is unchanged is left as it
    is, so that Sphinx rebuilds only what changed."""
    output.mkdir(parents=True, exist_ok=True)
    pages = {"c-abi.rst": c_abi_rst(HEADER.read_text()), "swift.rst": swift_rst(sorted(SWIFT_API.glob("*.swift")))}
    written = []
    for name, text in pages.items():
        path = output / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    for page in write_pages(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUTPUT):
        print(page)
