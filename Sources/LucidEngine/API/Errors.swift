// LocalizedError is Foundation's (FoundationEssentials' on Linux); where neither can be
// imported, LucidError is an Error with its message as its description.
#if canImport(ObjectiveC)
import Foundation
#elseif canImport(FoundationEssentials)
import FoundationEssentials
#endif

#if canImport(ObjectiveC) || canImport(FoundationEssentials)
/// `error.localizedDescription` is the engine's message, as `description` is.
extension LucidError: LocalizedError {
    public var errorDescription: String? { message }
}
#endif

extension LucidError {
    /// The engine's messages name arguments as Python spells them (the C ABI's callers are
    /// Python's): each spelling here, as it appears in a message, and how the Swift API spells
    /// the same argument.
    static let swiftSpellings: [(python: String, swift: String)] = [
        ("pass retain_graph=True to the first call", "pass retainGraph: true to the first backward call"),
        ("Set allow_unused=True if this is the desired behavior.", "Pass allowUnused: true if this is the desired behavior."),
        ("does not require grad and has no grad_fn", "does not require gradients and has no gradFn"),
        ("can't retain_grad on Tensor that has requires_grad=False", "retainGrad(): the tensor does not require gradients (requiresGrad is false)"),
        ("pass either attn_mask or is_causal, not both", "pass either mask or isCausal: true, not both"),
        ("dropout_p must be in", "dropout must be in"),
        ("embedding: padding_idx", "embedding: paddingIndex"),
        ("running_mean and running_var must be given together", "runningMean and runningVar must be given together"),
        ("label_smoothing must be between", "labelSmoothing must be between"),
        ("or equal ignore_index=", "or equal the ignored index "),
    ]

    /// This error with the Python spellings of its message replaced by the Swift API's.
    func swiftSpelled() -> LucidError {
        var m = message
        for (python, swift) in Self.swiftSpellings where m.contains(python) {
            m = m.replacing(python, with: swift)
        }
        return m == message ? self : LucidError(kind, m)
    }
}

/// Runs `body`, an entry of the Swift API, rethrowing an engine error with its arguments named
/// as Swift callers name them.
func swiftSpelled<R>(_ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch let e as LucidError {
        throw e.swiftSpelled()
    }
}
