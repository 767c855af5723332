"""The API reference's Swift and C ABI pages are written from the sources by tools/gen_api_docs.py
at each `make docs`; these tests read the sources on their own and check that the pages leave
nothing out: every function of include/lucid.h in its section with its comment, and every public
declaration of Sources/LucidEngine/API/*.swift with its doc comment."""

import re
from pathlib import Path

from _helpers import load_file

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "lucid.h"
SWIFT_FILES = sorted((ROOT / "Sources" / "LucidEngine" / "API").glob("*.swift"))


GEN = load_file("tools/gen_api_docs.py")
C_PAGE = GEN.c_abi_rst(HEADER.read_text())
SWIFT_PAGE = GEN.swift_rst(SWIFT_FILES)


def _words(text: str) -> str:
    """Text as a reader sees it, for comparing a source comment with its reST: no markup
    escapes, no backquotes, single spaces."""
    text = text.replace("\\ ", "").replace("\\", "").replace("`", "")
    return " ".join(text.split())


# ---- the C ABI page ---------------------------------------------------------------------------


def _header_functions():
    """{function name: its section's title}, read straight from the header."""
    functions, section = {}, None
    text = HEADER.read_text()
    for line in re.sub(r"/\*(?!\s*-{3,}).*?\*/", " ", text, flags=re.S).splitlines():
        m = re.match(r"\s*/\*\s*-{3,}\s*(.*?)\s*-{3,}\s*\*/", line)
        if m:
            section = m.group(1)
            continue
        for name in re.findall(r"\b((?:lucid|guard)_\w+)\s*\(", line):
            functions[name] = section
    return functions


def _page_functions(page: str):
    """{function name: the title of the section it is documented in} from the reST's
    `.. c:function::` directives."""
    functions, section = {}, None
    lines = page.splitlines()
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and lines[i + 1] and set(lines[i + 1]) == {"-"} and len(lines[i + 1]) == len(line):
            section = line
        m = re.match(r"\.\. c:function:: .*?\b((?:lucid|guard)_\w+)\(", line)
        if m:
            functions[m.group(1)] = section
    return functions


def test_every_function_of_the_header_is_on_the_c_abi_page_in_its_section():
    header, page = _header_functions(), _page_functions(C_PAGE)
    assert len(header) > 100
    missing = sorted(set(header) - set(page))
    assert not missing, f"in include/lucid.h but not on the C ABI page: {missing}"
    extra = sorted(set(page) - set(header))
    assert not extra, f"on the C ABI page but not in include/lucid.h: {extra}"
    for name, section in header.items():
        if section is None:  # before the header's first section line
            assert page[name] == "Types, codes and errors", name
        else:
            assert page[name].lower() == section.lower(), f"{name}: under {page[name]!r}, not {section!r}"


def test_every_comment_of_the_header_is_on_the_c_abi_page():
    page = _words(C_PAGE)
    for comment in re.findall(r"/\*(.*?)\*/", HEADER.read_text(), flags=re.S):
        if re.match(r"\s*-{3,}", comment):  # a section line: a heading, checked above
            continue
        for line in comment.splitlines():
            line = _words(re.sub(r"^\s*\*(?=\s|$)", "", line))
            line = line[2:] if line.startswith("- ") else line  # a list item's text
            assert line in page, f"include/lucid.h comment line not on the C ABI page: {line!r}"


def test_each_function_has_the_comment_written_right_above_it():
    lines = HEADER.read_text().splitlines()
    checked = 0
    for k, line in enumerate(lines):
        m = re.match(r"\s*(?:const\s+)?\w+\s*\*?\s*((?:lucid|guard)_\w+)\(", line)
        if not (m and k and lines[k - 1].rstrip().endswith("*/") and not re.search(r"-{3,}\s*\*/", lines[k - 1])):
            continue
        start = k - 1
        while "/*" not in lines[start]:
            start -= 1
        comment = _words(" ".join(re.sub(r"^\s*(/\*|\*/|\*)", "", l) for l in lines[start:k]).replace("*/", ""))
        entry = re.search(
            rf"^\.\. c:function:: [^\n]*\b{m.group(1)}\(.*?(?=^\.\. |^\S[^\n]*\n-+$|\Z)", C_PAGE, flags=re.S | re.M
        )
        assert comment in _words(entry.group(0)), f"{m.group(1)}: its comment is not under it: {comment!r}"
        checked += 1
    assert checked > 50


def test_every_enumerator_of_the_header_is_on_the_c_abi_page():
    text = re.sub(r"/\*.*?\*/", " ", HEADER.read_text(), flags=re.S)
    for body in re.findall(r"enum\s+\w+\s*\{(.*?)\}", text, flags=re.S):
        for name, value in re.findall(r"(\w+)\s*=\s*(-?\w+)", body):
            assert f".. c:enumerator:: {name} = {value}" in C_PAGE


def test_a_comment_goes_with_the_declaration_under_it_and_a_section_line_starts_a_section():
    page = GEN.c_abi_rst(
        "/* demo.h: a header.\n */\n#ifndef X\n"
        "/* ---- first ---- */\n\n/* About the section. */\n\n"
        "/* The first call. */\nint32_t demo_a(int32_t x);\nint32_t demo_b(void);\n"
        "/* demo_b returns 0. */\n\n"
        "/* ---- second ---- */\n/* Just this one, with `out` *written*. */\n"
        "int32_t demo_c(int32_t *out);\n#endif\n"
    )
    assert page.index("First\n-----") < page.index("About the section.") < page.index("demo_a")
    assert ".. c:function:: int32_t demo_a(int32_t x)\n\n   The first call.\n\n" in page
    # A comment right under a declaration that names it is a note on that declaration.
    assert ".. c:function:: int32_t demo_b(void)\n\n   demo\\_b returns 0.\n\n" in page
    assert page.index("Second\n------") < page.index("demo_c")
    assert ".. c:function:: int32_t demo_c(int32_t *out)\n\n   Just this one, with ``out`` \\*written\\*.\n" in page


# ---- the Swift API page -------------------------------------------------------------------------


def _public_declarations(text: str):
    """The first line of every `public` declaration, without a body that starts on it."""
    for line in text.splitlines():
        code = line.split("//", 1)[0].strip()
        if re.match(r"(?:@\w+\s+)*(?:\w+\s+)*public\b", code):
            yield " ".join(code.split("{", 1)[0].split())


def test_every_public_swift_declaration_is_on_the_swift_page():
    page = _words(SWIFT_PAGE)
    count = 0
    for path in SWIFT_FILES:
        for declaration in _public_declarations(path.read_text()):
            count += 1
            assert _words(declaration) in page, f"{path.name}: {declaration!r} is not on the Swift page"
    assert count > 50


def test_every_swift_doc_comment_of_a_public_declaration_is_on_the_swift_page():
    page = _words(SWIFT_PAGE)
    for path in SWIFT_FILES:
        doc = []
        for line in path.read_text().splitlines():
            if line.strip().startswith("///"):
                doc.append(line.strip()[3:])
                continue
            if next(_public_declarations(line), None) is not None:
                for text in doc:
                    if text.strip() and not text.strip().startswith("```"):
                        assert _words(text) in page, f"{path.name}: doc comment line not on the Swift page: {text!r}"
            doc = []


def test_a_swift_type_gets_a_section_with_its_members_and_their_marks(tmp_path):
    source = (
        "/// A thing.\npublic struct Thing {\n    /// Its size.\n    public var size: Int { 1 }\n"
        "    // MARK: Ops\n    public func scaled(by factor: Double,\n"
        "                       twice: Bool) throws -> Thing {\n"
        "        self\n    }\n    func hidden() {}\n    /// Nested.\n    public enum Kind { case a }\n}\n"
        "public func free(_ t: Thing) -> Int { t.size }\n"
    )
    path = tmp_path / "Thing.swift"
    path.write_text(source)
    page = GEN.swift_rst([path])
    assert "Thing\n~~~~~\n" in page and "Thing.Kind\n~~~~~~~~~~\n" in page and "Functions\n~~~~~~~~~\n" in page
    assert ".. describe:: public var size: Int\n\n   Its size." in page
    assert (
        ".. rubric:: Ops\n\n.. describe:: public func scaled(by factor: Double, twice: Bool) throws -> Thing\n" in page
    )
    assert "hidden" not in page
    assert page.index("public struct Thing") < page.index("A thing.") < page.index("public var size")
    assert ".. describe:: public func free(_ t: Thing) -> Int" in page
