#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

import LucidEngine

/// Status codes: 0 is success, the rest are `LucidError.Kind` raw values.
let statusOK: Int32 = 0

/// The calling thread's last error message, kept as a C string until the next failure on the
/// same thread replaces it (or the thread ends).
enum LastError {
    static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k) { free($0) }
        return k
    }()

    static func set(_ message: String) {
        let old = pthread_getspecific(key)
        pthread_setspecific(key, strdup(message))
        free(old)
    }

    static func get() -> UnsafePointer<CChar>? {
        pthread_getspecific(key).map { UnsafePointer($0.assumingMemoryBound(to: CChar.self)) }
    }
}

/// Runs one ABI call: a thrown `LucidError` becomes its status code and the thread's message.
@inline(__always)
func abiCall(_ body: () throws -> Void) -> Int32 {
    do {
        try body()
        return statusOK
    } catch let e as LucidError {
        LastError.set(e.message)
        return e.kind.rawValue
    } catch {
        LastError.set("\(error)")
        return LucidError.Kind.runtime.rawValue
    }
}

/// `items[index]` for an entry query; out of range, an index error naming `what`, the valid
/// range and `hint` (how the entries are made).
func entry<T>(_ items: [T], _ index: Int64, _ what: String, _ hint: String = "") throws -> T {
    guard index >= 0, index < Int64(items.count) else {
        throw LucidError(.index, "\(what) \(index) is out of range 0..<\(items.count)\(hint)")
    }
    return items[Int(index)]
}

/// Writes `value` through an out-pointer, rejecting null.
@inline(__always)
func store<T>(_ value: T, _ out: UnsafeMutablePointer<T>?, _ what: String = "out") throws {
    guard let out else { throw LucidError(.value, "\(what) pointer is null") }
    out.pointee = value
}

/// Reads `count` Int64 values from a C array into [Int], rejecting null and negative counts.
func intArray(_ p: UnsafePointer<Int64>?, _ count: Int32, _ what: String) throws -> [Int] {
    guard count >= 0 else { throw LucidError(.value, "\(what): negative length \(count)") }
    guard count <= 64 else { throw LucidError(.value, "\(what): \(count) dimensions is more than the 64 supported") }
    if count == 0 { return [] }
    guard let p else { throw LucidError(.value, "\(what) pointer is null") }
    return (0..<Int(count)).map { i -> Int in
        let v = p[i]
        return Int(clamping: v)
    }
}

/// A code a caller passed for one of the header's enums, as its Swift enum (the engine's where
/// it has one with the header's values, else one of this layer's): every code the C ABI takes
/// is decoded here, and an unknown one is a value error naming `what` and the valid codes.
func decode<E: RawRepresentable & CaseIterable>(_ raw: E.RawValue, as _: E.Type = E.self, _ what: String) throws -> E
where E.RawValue: BinaryInteger {
    if let value = E(rawValue: raw) { return value }
    throw LucidError(.value, "unknown \(what) code \(raw); expected one of \(validCodes(E.self))")
}

/// The codes of `E`, for an error message: each with its case's name when there are few, else
/// as ranges ("0...58").
func validCodes<E: RawRepresentable & CaseIterable>(_: E.Type) -> String where E.RawValue: BinaryInteger {
    let cases = E.allCases.sorted { $0.rawValue < $1.rawValue }
    if cases.count <= 16 {
        return cases.map { "\($0.rawValue) (\(codeName($0)))" }.joined(separator: ", ")
    }
    var ranges: [(E.RawValue, E.RawValue)] = []
    for c in cases {
        if let last = ranges.last, last.1 + 1 == c.rawValue {
            ranges[ranges.count - 1].1 = c.rawValue
        } else {
            ranges.append((c.rawValue, c.rawValue))
        }
    }
    return ranges.map { r in r.0 == r.1 ? "\(r.0)" : "\(r.0)...\(r.1)" }.joined(separator: ", ")
}

/// A case's name as the header spells its enumerator's tail, in lower case ("float32",
/// "post_accumulate").
private func codeName<E>(_ value: E) -> String {
    if let d = value as? DType { return d.name }
    // Otherwise the case's description: its name unless the enum gives another.
    var name = ""
    var previous: Character = " "
    for c in String(describing: value) {
        if c.isUppercase && (previous.isLowercase || previous.isNumber) { name.append("_") }
        name += c.lowercased()
        previous = c
    }
    return name
}

/// A flags word whose bits are the codes of `E` (each a power of two): the set bits, each
/// decoded as one code.
func decodeFlags<E: RawRepresentable & CaseIterable>(_ raw: E.RawValue, as _: E.Type = E.self, _ what: String) throws -> Set<E>
where E.RawValue: FixedWidthInteger, E: Hashable {
    var flags = Set<E>()
    for bit in 0..<E.RawValue.bitWidth where raw & (1 << bit) != 0 {
        flags.insert(try decode(E.RawValue(1) << bit, as: E.self, what))
    }
    return flags
}

/// Optional dtype code: -1 means "not given"; any other code must be valid.
func optionalDType(_ code: Int32) throws -> DType? { code == -1 ? nil : try decode(code, as: DType.self, "dtype") }
/// Optional device code: -1 means "not given"; any other code must be valid.
func optionalDevice(_ code: Int32) throws -> Device? { code == -1 ? nil : try decode(code, as: Device.self, "device") }
