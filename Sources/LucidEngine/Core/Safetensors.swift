/// The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte little-endian
/// header length N, N bytes of JSON naming each tensor's dtype, shape and byte range
/// (`data_offsets`, relative to the end of the header) plus an optional `__metadata__` object
/// of strings, then the tensors' bytes, little-endian and row-major, packed without gaps.
///
/// This is the one reader and writer of the format: Swift's `saveSafetensors` /
/// `loadSafetensors` and Python's `lucid.save` / `lucid.load` (through the C ABI) use it, so
/// that both refuse the same files with the same messages. The reader trusts nothing in the
/// file: every length, offset, shape and dtype is checked against the bytes there before
/// anything is allocated, and a refusal is a `LucidError.value` whose message starts with
/// "not a valid safetensors file: " (or names a dtype lucid cannot hold).
package enum Safetensors {
    /// The longest header accepted (the reference implementation's limit).
    package static let maxHeader = 100_000_000
    /// How deeply the header's JSON may nest.
    static let maxDepth = 128

    /// Every dtype the format names, in the reference implementation's order (the writer
    /// stores larger elements first: descending in this order, then by name).
    package enum ElementType: String, CaseIterable, Sendable {
        case bool = "BOOL", f4 = "F4", f6e2m3 = "F6_E2M3", f6e3m2 = "F6_E3M2", u8 = "U8", i8 = "I8"
        case f8e5m2 = "F8_E5M2", f8e4m3 = "F8_E4M3", f8e8m0 = "F8_E8M0", i16 = "I16", u16 = "U16"
        case f16 = "F16", bf16 = "BF16", i32 = "I32", u32 = "U32", f32 = "F32", c64 = "C64"
        case f64 = "F64", i64 = "I64", u64 = "U64"

        /// The dtype of lucid that holds this type's values: the same bits, or for U16 and U32
        /// the narrowest signed type that holds every value (as numpy's arrays convert); nil
        /// for types lucid cannot hold.
        package var dtype: DType? {
            switch self {
            case .bool: return .bool
            case .u8: return .uint8
            case .i8: return .int8
            case .i16: return .int16
            case .u16: return .int32
            case .f16: return .float16
            case .bf16: return .bfloat16
            case .i32: return .int32
            case .u32: return .int64
            case .f32: return .float32
            case .f64: return .float64
            case .i64: return .int64
            default: return nil
            }
        }

        /// Bytes per element, for the types lucid reads or writes.
        package var itemSize: Int {
            switch self {
            case .u16: return 2
            case .u32: return 4
            default: return dtype?.itemSize ?? 0
            }
        }

        /// The type that stores `dtype`'s elements bit for bit.
        package init(_ dtype: DType) {
            switch dtype {
            case .float32: self = .f32
            case .float16: self = .f16
            case .bfloat16: self = .bf16
            case .int32: self = .i32
            case .int64: self = .i64
            case .bool: self = .bool
            case .float64: self = .f64
            case .uint8: self = .u8
            case .int8: self = .i8
            case .int16: self = .i16
            }
        }

        var rank: Int { Self.allCases.firstIndex(of: self)! }

        /// The type the format calls `name`, when lucid writes it (a `.type` error otherwise).
        package static func writable(_ name: String, for tensor: String) throws -> ElementType {
            guard let t = ElementType(rawValue: name), t.itemSize > 0 else {
                let names = allCases.filter { $0.itemSize > 0 }.map(\.rawValue).joined(separator: ", ")
                throw LucidError.type("tensor '\(tensor)': cannot write dtype '\(name)' (lucid writes \(names))")
            }
            return t
        }
    }

    /// One tensor of a file: its name, type, shape and the bytes it occupies in the file
    /// (absolute offsets).
    package struct Entry: Sendable {
        package let name: String
        package let type: ElementType
        package let shape: [Int]
        package let range: Range<Int>
    }

    /// A checked file: its tensors in the order of their data, and its metadata.
    package struct Contents: Sendable {
        package let entries: [Entry]
        package let metadata: [(key: String, value: String)]

        package init(entries: [Entry], metadata: [(key: String, value: String)]) {
            self.entries = entries
            self.metadata = metadata
        }
    }

    static func invalid(_ why: String) -> LucidError { LucidError.value("not a valid safetensors file: \(why)") }

    // MARK: Reading

    /// Checks the file in `bytes` and describes it. Refused: a length field that is short,
    /// beyond the file or beyond `maxHeader`; a header that is not UTF-8, not JSON, nested
    /// deeper than 128, not an object, or that names a key twice; an entry that is not an
    /// object with a known `dtype`, a `shape` of non-negative integers and two
    /// non-negative integer `data_offsets`; a dtype lucid cannot hold; byte ranges that do
    /// not tile the data from its start without gaps or overlaps, or whose length is not
    /// the shape's elements times the element size (or whose size overflows); bytes after
    /// the last range; metadata that is not an object of strings; a name or metadata
    /// string with a NUL character; BOOL bytes other than 0 and 1.
    package static func read(_ bytes: UnsafeRawBufferPointer) throws -> Contents {
        guard bytes.count >= 8 else { throw invalid("header too small: the file has \(bytes.count) bytes, fewer than the 8 of the header length") }
        var n: UInt64 = 0
        for i in 0..<8 { n |= UInt64(bytes[i]) << (8 * UInt64(i)) }
        guard n <= UInt64(maxHeader) else { throw invalid("header too large: the header length is \(n) bytes, more than the \(maxHeader) allowed") }
        let headerEnd = 8 + Int(n)
        guard headerEnd <= bytes.count else {
            throw invalid("invalid header length: the header length is \(n) bytes, but only \(bytes.count - 8) follow it")
        }
        let text = UnsafeRawBufferPointer(rebasing: bytes[8..<headerEnd])
        if let bad = invalidUTF8(text) { throw invalid("invalid UTF-8 in the header at byte \(8 + bad)") }
        var parser = JSONParser(text)
        let root = try parser.parseDocument()
        guard case .object(let members) = root else {
            throw invalid("invalid type: the header is \(root.kind), expected a JSON object")
        }
        var metadata: [(key: String, value: String)] = []
        var entries: [Entry] = []
        for (name, value) in members {
            if name == "__metadata__" {
                metadata = try readMetadata(value)
                continue
            }
            try checkText(name, "a tensor name")
            entries.append(try readEntry(name, value, dataStart: headerEnd))
        }
        entries.sort { ($0.range.lowerBound, $0.range.upperBound) < ($1.range.lowerBound, $1.range.upperBound) }
        var expected = headerEnd
        for e in entries {
            guard e.range.lowerBound == expected else {
                throw invalid(
                    "invalid offset: tensor '\(e.name)' has data_offsets [\(e.range.lowerBound - headerEnd), "
                        + "\(e.range.upperBound - headerEnd)], where [\(expected - headerEnd), ...] was expected "
                        + "(ranges must follow one another without gaps or overlaps)")
            }
            expected = e.range.upperBound
        }
        guard expected == bytes.count else {
            throw invalid(
                "data not fully covered: the tensors' data ends at byte \(expected), the file at byte \(bytes.count)")
        }
        for e in entries where e.type == .bool {
            for i in e.range where bytes[i] > 1 {
                throw invalid("the BOOL tensor '\(e.name)' holds bytes other than 0 and 1 (\(bytes[i]) at byte \(i))")
            }
        }
        return Contents(entries: entries, metadata: metadata)
    }

    /// How many bytes of tensor data the header JSON `text` declares (the furthest end of its
    /// `data_offsets`), or 0 when `text` is not a header: so that a stream is read no further
    /// than its header says, and the `read` of what was read names anything wrong.
    package static func declaredDataSize(_ text: UnsafeRawBufferPointer) -> Int {
        guard invalidUTF8(text) == nil else { return 0 }
        var parser = JSONParser(text)
        guard let root = try? parser.parseDocument(), case .object(let members) = root else { return 0 }
        var end: UInt64 = 0
        for (name, value) in members where name != "__metadata__" {
            guard case .object(let fields) = value, let offsets = fields.first(where: { $0.0 == "data_offsets" })?.1,
                case .array(let items) = offsets, items.count == 2, case .integer(let e) = items[1]
            else { continue }
            end = max(end, e)
        }
        return Int(clamping: end)
    }

    private static func readMetadata(_ value: JSON) throws -> [(key: String, value: String)] {
        switch value {
        case .null: return []
        case .object(let members):
            return try members.map { key, v in
                guard case .string(let s) = v else {
                    throw invalid("invalid type: metadata '\(key)' is \(v.kind), expected a string")
                }
                try checkText(key, "a metadata key")
                try checkText(s, "metadata '\(key)'")
                return (key, s)
            }
        default: throw invalid("invalid type: __metadata__ is \(value.kind), expected an object of strings")
        }
    }

    private static func checkText(_ s: String, _ what: String) throws {
        if s.utf8.contains(0) { throw invalid("\(what) holds a NUL character") }
    }

    private static func readEntry(_ name: String, _ value: JSON, dataStart: Int) throws -> Entry {
        guard case .object(let fields) = value else {
            throw invalid("invalid type: tensor '\(name)' is \(value.kind), expected an object")
        }
        func field(_ key: String) throws -> JSON {
            guard let v = fields.first(where: { $0.0 == key })?.1 else {
                throw invalid("missing field '\(key)' in tensor '\(name)'")
            }
            return v
        }
        func integers(_ key: String) throws -> [UInt64] {
            guard case .array(let items) = try field(key) else {
                throw invalid("invalid type: '\(key)' of tensor '\(name)' is \(try field(key).kind), expected a list of integers")
            }
            return try items.map { item in
                switch item {
                case .integer(let v): return v
                case .negative(let text):
                    throw invalid("invalid value: integer \(text) in '\(key)' of tensor '\(name)', expected a non-negative integer")
                default:
                    throw invalid("invalid type: '\(key)' of tensor '\(name)' holds \(item.kind), expected a non-negative integer")
                }
            }
        }
        guard case .string(let dtypeName) = try field("dtype") else {
            throw invalid("invalid type: the dtype of tensor '\(name)' is \(try field("dtype").kind), expected a string")
        }
        guard let type = ElementType(rawValue: dtypeName) else {
            throw invalid(
                "unknown variant '\(dtypeName)': tensor '\(name)' has a dtype the format does not name (expected one of "
                    + ElementType.allCases.map(\.rawValue).joined(separator: ", ") + ")")
        }
        guard type.dtype != nil else {
            throw LucidError.value("tensor '\(name)' has dtype \(dtypeName), which lucid cannot hold")
        }
        let dims = try integers("shape")
        let offsets = try integers("data_offsets")
        guard offsets.count == 2 else {
            throw invalid("invalid length: data_offsets of tensor '\(name)' has \(offsets.count) values, expected 2")
        }
        guard offsets[0] <= offsets[1] else {
            throw invalid("invalid offset: tensor '\(name)' has data_offsets [\(offsets[0]), \(offsets[1])], which end before they start")
        }
        var count: UInt64 = UInt64(type.itemSize)
        for d in dims {
            let (p, overflow) = count.multipliedReportingOverflow(by: d)
            guard !overflow, p <= UInt64(Int.max) else {
                throw invalid("overflow: the shape \(dims) of tensor '\(name)' holds more than 2^63 bytes")
            }
            count = p
        }
        guard count == offsets[1] - offsets[0] else {
            throw invalid(
                "invalid shape: tensor '\(name)' of shape \(dims) and dtype \(dtypeName) holds \(count) bytes, but its "
                    + "data_offsets [\(offsets[0]), \(offsets[1])] span \(offsets[1] - offsets[0])")
        }
        // A range that starts past what an Int can address is past any file.
        let limit = UInt64(Int.max - dataStart)
        guard offsets[1] <= limit else {
            throw invalid("invalid offset: tensor '\(name)' has data_offsets [\(offsets[0]), \(offsets[1])], past the end of any file")
        }
        guard dims.count <= 64 else {
            throw LucidError.value("tensor '\(name)' has \(dims.count) dimensions, which lucid cannot hold (at most 64)")
        }
        return Entry(
            name: name, type: type, shape: dims.map { Int($0) },
            range: (dataStart + Int(offsets[0]))..<(dataStart + Int(offsets[1])))
    }

    /// The offset of the first byte that does not belong to valid UTF-8, or nil.
    private static func invalidUTF8(_ b: UnsafeRawBufferPointer) -> Int? {
        var i = 0
        while i < b.count {
            let c = b[i]
            if c < 0x80 {
                i += 1
                continue
            }
            let need: Int, low: UInt8, high: UInt8
            switch c {
            case 0xC2...0xDF: (need, low, high) = (1, 0x80, 0xBF)
            case 0xE0: (need, low, high) = (2, 0xA0, 0xBF)
            case 0xE1...0xEC, 0xEE...0xEF: (need, low, high) = (2, 0x80, 0xBF)
            case 0xED: (need, low, high) = (2, 0x80, 0x9F)
            case 0xF0: (need, low, high) = (3, 0x90, 0xBF)
            case 0xF1...0xF3: (need, low, high) = (3, 0x80, 0xBF)
            case 0xF4: (need, low, high) = (3, 0x80, 0x8F)
            default: return i
            }
            guard i + need < b.count, (low...high).contains(b[i + 1]) else { return i }
            for k in 2..<(need + 1) where !(0x80...0xBF).contains(b[i + k]) { return i }
            i += need + 1
        }
        return nil
    }

    // MARK: Writing

    /// One tensor to write: its bytes (row-major, little-endian) of `type` and `shape`.
    package struct Item {
        package let name: String
        package let type: ElementType
        package let shape: [Int]
        package let bytes: UnsafeRawBufferPointer

        package init(name: String, type: ElementType, shape: [Int], bytes: UnsafeRawBufferPointer) {
            self.name = name
            self.type = type
            self.shape = shape
            self.bytes = bytes
        }
    }

    /// The layout of a file to write: its header (the length field, the JSON padded with
    /// spaces to a multiple of 8 bytes, so that the data starts 8-byte aligned) and the
    /// items in the order of their data (larger elements first, then by name), as the
    /// reference implementation writes them.
    package struct Layout {
        package let header: [UInt8]
        package let order: [Int]
        package let size: Int
    }

    /// Checks `items` and `metadata` and lays the file out. Refused: two items of one name,
    /// the name `__metadata__`, a NUL character in a name or metadata string, a type lucid
    /// does not write, bytes that are not the shape's elements times the element size.
    package static func layout(_ items: [Item], metadata: [(key: String, value: String)]) throws -> Layout {
        var seen = Set<String>()
        for item in items {
            guard seen.insert(item.name).inserted else { throw LucidError.value("two tensors are named '\(item.name)'") }
            guard item.name != "__metadata__" else { throw LucidError.value("a tensor cannot be named '__metadata__'") }
            guard !item.name.utf8.contains(0) else { throw LucidError.value("a tensor name holds a NUL character") }
            guard item.type.itemSize > 0 else { throw LucidError.value("tensor '\(item.name)': lucid does not write \(item.type.rawValue)") }
            guard item.shape.allSatisfy({ $0 >= 0 }) else {
                throw LucidError.value("tensor '\(item.name)' has a negative size in its shape \(item.shape)")
            }
            let need = try Shape.numel(item.shape).multipliedReportingOverflow(by: item.type.itemSize)
            guard !need.overflow, need.partialValue == item.bytes.count else {
                throw LucidError.value(
                    "tensor '\(item.name)' of shape \(item.shape) and dtype \(item.type.rawValue) needs "
                        + "\(need.overflow ? "more than 2^63" : "\(need.partialValue)") bytes, got \(item.bytes.count)")
            }
        }
        var keys = Set<String>()
        for (k, v) in metadata {
            guard keys.insert(k).inserted else { throw LucidError.value("the metadata key '\(k)' is given twice") }
            guard !k.utf8.contains(0), !v.utf8.contains(0) else { throw LucidError.value("metadata '\(k)' holds a NUL character") }
        }
        let order = items.indices.sorted { a, b in
            let x = items[a], y = items[b]
            if x.type.rank != y.type.rank { return x.type.rank > y.type.rank }
            return x.name.utf8.lexicographicallyPrecedes(y.name.utf8)
        }
        var json: [UInt8] = [UInt8(ascii: "{")]
        var first = true
        func key(_ k: String) {
            if !first { json.append(UInt8(ascii: ",")) }
            first = false
            appendString(k, to: &json)
            json.append(UInt8(ascii: ":"))
        }
        if !metadata.isEmpty {
            key("__metadata__")
            json.append(UInt8(ascii: "{"))
            for (i, (k, v)) in metadata.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }).enumerated() {
                if i > 0 { json.append(UInt8(ascii: ",")) }
                appendString(k, to: &json)
                json.append(UInt8(ascii: ":"))
                appendString(v, to: &json)
            }
            json.append(UInt8(ascii: "}"))
        }
        var offset = 0
        for i in order {
            let item = items[i]
            key(item.name)
            let dims = item.shape.map(String.init).joined(separator: ",")
            let end = offset + item.bytes.count
            json += Array("{\"dtype\":\"\(item.type.rawValue)\",\"shape\":[\(dims)],\"data_offsets\":[\(offset),\(end)]}".utf8)
            offset = end
        }
        json.append(UInt8(ascii: "}"))
        json += [UInt8](repeating: UInt8(ascii: " "), count: (8 - json.count % 8) % 8)
        guard json.count <= maxHeader else {
            throw LucidError.value("the header would take \(json.count) bytes, more than the \(maxHeader) a reader accepts")
        }
        var header = [UInt8](repeating: 0, count: 8)
        for i in 0..<8 { header[i] = UInt8(truncatingIfNeeded: UInt64(json.count) >> (8 * UInt64(i))) }
        return Layout(header: header + json, order: order, size: 8 + json.count + offset)
    }

    /// Writes the file `layout` describes into `out` (exactly `layout.size` bytes).
    package static func write(_ items: [Item], _ layout: Layout, into out: UnsafeMutableRawBufferPointer) {
        layout.header.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        var at = layout.header.count
        for i in layout.order where !items[i].bytes.isEmpty {
            (out.baseAddress! + at).copyMemory(from: items[i].bytes.baseAddress!, byteCount: items[i].bytes.count)
            at += items[i].bytes.count
        }
    }

    /// `s` as a JSON string, escaped as serde_json escapes it (quote, backslash, and control
    /// characters; `\b \f \n \r \t` in their short forms).
    private static func appendString(_ s: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x08: out += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
            case 0x0C: out += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20: out += Array("\\u00".utf8) + [hex[Int(c >> 4)], hex[Int(c & 15)]]
            default: out.append(c)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

// MARK: - JSON

/// A JSON value as the header parser reads it: objects keep their members in order (a key
/// named twice is refused while parsing), integers keep 64 bits exactly.
enum JSON {
    case object([(String, JSON)])
    case array([JSON])
    case string(String)
    case integer(UInt64)
    /// A negative integer, as written.
    case negative(String)
    case float
    case bool
    case null

    var kind: String {
        switch self {
        case .object: return "a JSON object"
        case .array: return "a JSON array"
        case .string: return "a JSON string"
        case .integer, .negative: return "an integer"
        case .float: return "a floating-point number"
        case .bool: return "a boolean"
        case .null: return "null"
        }
    }
}

/// A strict JSON parser (RFC 8259) over validated UTF-8: at most `Safetensors.maxDepth`
/// levels of nesting, no key twice in an object, integers beyond 64 bits refused.
struct JSONParser {
    let b: UnsafeRawBufferPointer
    var i = 0
    var depth = 0

    init(_ bytes: UnsafeRawBufferPointer) { b = bytes }

    func fail(_ why: String) -> LucidError { Safetensors.invalid("invalid JSON in the header: \(why) at byte \(8 + i)") }

    mutating func parseDocument() throws -> JSON {
        let v = try value()
        skipSpace()
        guard i == b.count else { throw fail("trailing characters") }
        return v
    }

    mutating func skipSpace() {
        while i < b.count, [0x20, 0x09, 0x0A, 0x0D].contains(b[i]) { i += 1 }
    }

    mutating func expect(_ word: String) throws {
        for c in word.utf8 {
            guard i < b.count, b[i] == c else { throw fail("expected '\(word)'") }
            i += 1
        }
    }

    mutating func value() throws -> JSON {
        skipSpace()
        guard i < b.count else { throw fail("EOF while parsing a value") }
        switch b[i] {
        case UInt8(ascii: "{"):
            return try nested { p in try p.object() }
        case UInt8(ascii: "["):
            return try nested { p in try p.array() }
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try expect("true")
            return .bool
        case UInt8(ascii: "f"):
            try expect("false")
            return .bool
        case UInt8(ascii: "n"):
            try expect("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw fail("expected a value")
        }
    }

    mutating func nested(_ body: (inout JSONParser) throws -> JSON) throws -> JSON {
        depth += 1
        guard depth <= Safetensors.maxDepth else { throw fail("recursion limit exceeded (\(Safetensors.maxDepth) levels)") }
        defer { depth -= 1 }
        return try body(&self)
    }

    mutating func object() throws -> JSON {
        i += 1
        var members: [(String, JSON)] = []
        var keys = Set<String>()
        skipSpace()
        if i < b.count, b[i] == UInt8(ascii: "}") {
            i += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard i < b.count, b[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try string()
            guard keys.insert(key).inserted else {
                throw Safetensors.invalid("the key '\(key)' appears twice in an object of the header")
            }
            skipSpace()
            guard i < b.count, b[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            i += 1
            members.append((key, try value()))
            skipSpace()
            guard i < b.count else { throw fail("EOF while parsing an object") }
            if b[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            guard b[i] == UInt8(ascii: "}") else { throw fail("expected ',' or '}'") }
            i += 1
            return .object(members)
        }
    }

    mutating func array() throws -> JSON {
        i += 1
        var items: [JSON] = []
        skipSpace()
        if i < b.count, b[i] == UInt8(ascii: "]") {
            i += 1
            return .array(items)
        }
        while true {
            items.append(try value())
            skipSpace()
            guard i < b.count else { throw fail("EOF while parsing a list") }
            if b[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            guard b[i] == UInt8(ascii: "]") else { throw fail("expected ',' or ']'") }
            i += 1
            return .array(items)
        }
    }

    mutating func hexDigit() throws -> UInt32 {
        guard i < b.count else { throw fail("EOF in a \\u escape") }
        let c = b[i]
        i += 1
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(c - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(c - UInt8(ascii: "A") + 10)
        default: throw fail("invalid \\u escape")
        }
    }

    mutating func unit() throws -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 { v = v << 4 | (try hexDigit()) }
        return v
    }

    mutating func string() throws -> String {
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < b.count else { throw fail("EOF while parsing a string") }
            let c = b[i]
            i += 1
            switch c {
            case UInt8(ascii: "\""): return String(decoding: out, as: UTF8.self)
            case 0..<0x20: throw fail("control character in a string")
            case UInt8(ascii: "\\"):
                guard i < b.count else { throw fail("EOF while parsing a string") }
                let e = b[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try unit()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard i + 1 < b.count, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate in a \\u escape")
                        }
                        i += 2
                        let low = try unit()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate in a \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw fail("unpaired surrogate in a \\u escape")
                    }
                    out += Array(String(Character(Unicode.Scalar(scalar)!)).utf8)
                default: throw fail("invalid escape")
                }
            default: out.append(c)
            }
        }
    }

    mutating func number() throws -> JSON {
        let start = i
        let negative = b[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.i
            while p.i < p.b.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.b[p.i]) { p.i += 1 }
            return p.i - s
        }
        let intStart = i
        let n = digits(&self)
        guard n > 0 else { throw fail("invalid number") }
        guard n == 1 || b[intStart] != UInt8(ascii: "0") else { throw fail("invalid number (a leading zero)") }
        var isFloat = false
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            guard digits(&self) > 0 else { throw fail("invalid number") }
            isFloat = true
        }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard digits(&self) > 0 else { throw fail("invalid number") }
            isFloat = true
        }
        if isFloat { return .float }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: b[start..<i]), as: UTF8.self)
        if negative { return text == "-0" ? .integer(0) : .negative(text) }
        guard let v = UInt64(text) else {
            let saved = i
            i = start
            defer { i = saved }
            throw fail("the number \(text) is out of range")
        }
        return .integer(v)
    }
}
