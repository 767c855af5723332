/// An error raised by the engine. Every failure an input can cause is reported as one of
/// these, never as a trap; the C ABI turns `kind` into its status code and Python into the
/// matching exception type.
public struct LucidError: Error, CustomStringConvertible, Sendable {
    /// What kind of mistake it was, mirroring Python's exception types.
    public enum Kind: Int32, Sendable {
        /// A value is out of its allowed set or range (Python `ValueError`).
        case value = 1
        /// A dtype or argument type is wrong (Python `TypeError`).
        case type = 2
        /// A dimension or index is out of range (Python `IndexError`).
        case index = 3
        /// The request is well formed but cannot be carried out now (Python `RuntimeError`).
        case runtime = 4
        /// A handle passed through the C ABI is null, unknown, stale or already released.
        case handle = 5
        /// The call was made on a thread that does not own the object.
        case thread = 6
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    static func value(_ m: String) -> LucidError { LucidError(.value, m) }
    static func type(_ m: String) -> LucidError { LucidError(.type, m) }
    static func index(_ m: String) -> LucidError { LucidError(.index, m) }
    static func runtime(_ m: String) -> LucidError { LucidError(.runtime, m) }
}
